# transfer_engine_bench (docs/transfer-engine.md, "`transfer_engine_bench`") and the memcpy reference it is
# compared with.
mc_tool(transfer_engine_bench te ${CMAKE_CURRENT_SOURCE_DIR}/transfer_engine_bench.c)
add_executable(memcpy_ref ${CMAKE_CURRENT_SOURCE_DIR}/../bench/memcpy_ref.c)
target_link_libraries(memcpy_ref PRIVATE mc_common)
# shm_pages: the cost of a shared-memory page with 4 KiB and 2 MiB pages (bench/RESULTS.md, "Memory: 2 MiB pages and
# the warm-up").
add_executable(shm_pages ${CMAKE_CURRENT_SOURCE_DIR}/../bench/shm_pages.c)
# auth_cost: what the cluster-secret handshake adds to a new connection (bench/run_auth_cost.sh).
add_executable(auth_cost ${CMAKE_CURRENT_SOURCE_DIR}/../bench/auth_cost.c)
target_link_libraries(auth_cost PRIVATE mc_te)
# conn_rate: loopback connections per second, the reference of the per-connection fuzz targets (bench/run_fuzz.sh).
add_executable(conn_rate ${CMAKE_CURRENT_SOURCE_DIR}/../bench/conn_rate.c)
target_link_libraries(conn_rate PRIVATE pthread)
# ping_ref: what answering 100 000 small requests a second costs a bare server (bench/RESULTS.md, "The reference
# for the master's CPU under 100 000 pings a second"; bench/run_master_segments.sh).
add_executable(ping_ref ${CMAKE_CURRENT_SOURCE_DIR}/../bench/ping_ref.c)
target_link_libraries(ping_ref PRIVATE pthread)
# hidx_feed: the master's holder-index feed alone with many holders (bench/RESULTS.md, "The holder-index feed
# with many holders"; docs/master.md, "Scale").
add_executable(hidx_feed ${CMAKE_CURRENT_SOURCE_DIR}/../bench/hidx_feed.c)
target_link_libraries(hidx_feed PRIVATE mc_master)
# disk_bench: the local-disk object store's put and get throughput, beside fio (bench/run_disk_bench.sh).
add_executable(disk_bench ${CMAKE_CURRENT_SOURCE_DIR}/../bench/disk_bench.c)
target_link_libraries(disk_bench PRIVATE mc_disk)
