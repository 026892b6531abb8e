/* capi_bench: the storage benchmarks' workloads driven from C through
 * engine.h, with no Go and no cgo. Its figures are the floor the Go binding
 * is measured against (scripts/bench-storage runs both back to back).
 *
 * Data: num keys of 16 decimal digits ("%016d", as db_bench), 100-byte
 * values, written in batches of 1000 without sync (as BenchmarkGet's
 * setup). Then:
 *   readrandom   one shale_get of a uniformly random key per op
 *   multiget64   shale_multi_get of 64 random keys; one op is one key
 *   readseq      full forward scans through shale_iter_next_batch into a
 *                64 KiB buffer, visiting every entry (as the Go iterator
 *                does); one op is one entry
 *   fillbatch    batches of 100 random-key puts, no sync; one op is one put
 *
 * Usage: capi_bench <scratch dir> [num] [ops]   (prints ns/op per workload) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shale/engine.h"

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static unsigned long long rng_state = 88172645463325252ULL;
static unsigned long long Rand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void Check(shale_status_t s, const char* what) {
  if (s.code != SHALE_OK) {
    fprintf(stderr, "%s: code %d: %s\n", what, (int)s.code,
            s.message ? s.message : "");
    exit(1);
  }
}

/* Appends Put(key, value) to a batch buffer; lengths < 128 fit one byte. */
static size_t AppendPut(unsigned char* b, size_t n, const char* key,
                        const unsigned char* val, size_t vlen) {
  b[n++] = SHALE_BATCH_PUT;
  b[n++] = 16;
  memcpy(b + n, key, 16);
  n += 16;
  b[n++] = (unsigned char)vlen;
  memcpy(b + n, val, vlen);
  return n + vlen;
}

static void SetCount(unsigned char* b, unsigned count) {
  memset(b, 0, 8);
  b[8] = count & 0xff;
  b[9] = (count >> 8) & 0xff;
  b[10] = (count >> 16) & 0xff;
  b[11] = (count >> 24) & 0xff;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: capi_bench <scratch dir> [num] [ops]\n");
    return 2;
  }
  int num = argc > 2 ? atoi(argv[2]) : 200000;
  int ops = argc > 3 ? atoi(argv[3]) : 1000000;
  shale_options_t opts;
  shale_options_init(&opts);
  shale_db_t* db;
  Check(shale_open(&opts, argv[1], &db), "open");
  shale_write_options_t wo = {0};
  shale_read_options_t ro;
  shale_read_options_init(&ro);

  unsigned char* batch = malloc(1 << 20);
  unsigned char val[100];
  memset(val, 'v', sizeof val);
  char key[17];
  for (int i = 0; i < num;) {
    size_t n = SHALE_BATCH_HEADER_SIZE;
    unsigned count = 0;
    for (; count < 1000 && i < num; count++, i++) {
      snprintf(key, sizeof key, "%016d", i);
      n = AppendPut(batch, n, key, val, sizeof val);
    }
    SetCount(batch, count);
    Check(shale_write(db, &wo, batch, n), "fill");
  }

  unsigned char buf[4096];
  size_t vlen;
  double t0 = Now();
  for (int i = 0; i < ops; i++) {
    snprintf(key, sizeof key, "%016d", (int)(Rand() % num));
    Check(shale_get(db, &ro, (unsigned char*)key, 16, buf, sizeof buf, &vlen),
          "get");
  }
  printf("readrandom  %8.1f ns/op\n", (Now() - t0) / ops * 1e9);

  enum { kBatch = 64 };
  unsigned char keys[kBatch * 16];
  size_t key_offs[kBatch + 1], val_offs[kBatch], val_lens[kBatch];
  int32_t statuses[kBatch];
  unsigned char* vals = malloc(kBatch * 200);
  t0 = Now();
  for (int i = 0; i < ops; i += kBatch) {
    for (int j = 0; j < kBatch; j++) {
      snprintf(key, sizeof key, "%016d", (int)(Rand() % num));
      memcpy(keys + 16 * j, key, 16);
      key_offs[j] = 16 * j;
    }
    key_offs[kBatch] = 16 * kBatch;
    Check(shale_multi_get(db, &ro, kBatch, keys, key_offs, vals, kBatch * 200,
                          val_offs, val_lens, statuses),
          "multi_get");
  }
  printf("multiget64  %8.1f ns/op\n", (Now() - t0) / ops * 1e9);

  shale_iterator_t* it;
  Check(shale_iter_new(db, &ro, NULL, 0, NULL, 0, &it), "iter_new");
  unsigned char* window = malloc(64 << 10);
  long entries = 0;
  size_t bytes = 0;
  t0 = Now();
  while (entries < ops) {
    shale_iter_seek_to_first(it);
    uint8_t valid = 1;
    while (valid) {
      size_t n, used;
      Check(shale_iter_next_batch(it, 0, 1 << 16, window, 64 << 10, &n,
                                  &used, &valid),
            "next_batch");
      /* Visit each entry: key_len fixed32, value_len fixed32, key, value. */
      const unsigned char* p = window;
      for (size_t e = 0; e < n; e++) {
        uint32_t kl, vl;
        memcpy(&kl, p, 4);
        memcpy(&vl, p + 4, 4);
        bytes += kl + vl;
        p += 8 + kl + vl;
      }
      entries += n;
    }
  }
  if (bytes == 0) fprintf(stderr, "readseq read nothing\n");
  printf("readseq     %8.1f ns/op\n", (Now() - t0) / entries * 1e9);
  shale_iter_free(it);

  t0 = Now();
  for (int i = 0; i < ops; i += 100) {
    size_t n = SHALE_BATCH_HEADER_SIZE;
    for (int j = 0; j < 100; j++) {
      snprintf(key, sizeof key, "%016d", (int)(Rand() % (num * 10)));
      n = AppendPut(batch, n, key, val, sizeof val);
    }
    SetCount(batch, 100);
    Check(shale_write(db, &wo, batch, n), "fillbatch");
  }
  printf("fillbatch   %8.1f ns/op\n", (Now() - t0) / ops * 1e9);
  Check(shale_close(db), "close");
  return 0;
}
