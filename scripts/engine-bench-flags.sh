# scripts/engine-bench-flags.sh: the db_bench flags every engine-vs-RocksDB
# row shares (sourced by scripts/compare-rocksdb and scripts/writeamp-repeat,
# so the two measure the same thing). Requires NUM (keys).
#
# The memtable is 4 MiB and L1 16 MiB (RocksDB's 64 MiB : 256 MiB ratio
# scaled down), so a 1M-key database (~65 MiB after snappy) is many
# memtables deep and compaction reaches L2. RocksDB's defaults that matter
# are passed explicitly to both tools.
# shellcheck disable=SC2034  # used by the scripts that source this file
COMMON=(--num="$NUM" --key_size=16 --value_size=100 --compression_type=snappy
  --compression_ratio=0.5 --block_size=4096 --bloom_bits=10
  --cache_size=67108864 --write_buffer_size=4194304 --max_write_buffer_number=2
  --target_file_size_base=4194304 --max_bytes_for_level_base=16777216
  --max_bytes_for_level_multiplier=10 --level0_file_num_compaction_trigger=4
  --level0_slowdown_writes_trigger=20 --level0_stop_writes_trigger=36
  --max_background_jobs=2 --threads=1 --sync=false --disable_wal=false)
