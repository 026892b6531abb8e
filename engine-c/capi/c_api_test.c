/* Tests engine.h from plain C: the header must compile as C, and every
 * call must work without C++ on the caller's side.
 *
 * Usage: c_api_test <scratch directory> */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shale/engine.h"

static const char* phase = "";
static int failures = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: %s: check failed: %s\n", __FILE__, __LINE__, \
              phase, #cond);                                               \
      failures++;                                                          \
    }                                                                      \
  } while (0)

#define CHECK_OK(expr)                                                     \
  do {                                                                     \
    shale_status_t st_ = (expr);                                           \
    if (st_.code != SHALE_OK) {                                            \
      fprintf(stderr, "%s:%d: %s: %s failed: %d %s\n", __FILE__, __LINE__, \
              phase, #expr, st_.code,                                      \
              st_.message ? st_.message : "(no message)");                 \
      failures++;                                                          \
    }                                                                      \
    shale_free(st_.message);                                               \
  } while (0)

/* Expects a given code; releases the message. */
static void CheckCode(shale_status_t st, int32_t want, int line) {
  if (st.code != want) {
    fprintf(stderr, "%s:%d: %s: got code %d (%s), want %d\n", __FILE__, line,
            phase, st.code, st.message ? st.message : "", want);
    failures++;
  }
  shale_free(st.message);
}
#define CHECK_CODE(expr, want) CheckCode((expr), (want), __LINE__)

/* A growable WriteBatch buffer in the engine.h format. */
typedef struct {
  uint8_t data[4096];
  size_t len;
  uint32_t count;
} batch_t;

static void batch_init(batch_t* b) {
  memset(b->data, 0, SHALE_BATCH_HEADER_SIZE);
  b->len = SHALE_BATCH_HEADER_SIZE;
  b->count = 0;
}

static void put_varstring(batch_t* b, const char* s, size_t n) {
  size_t v = n;
  while (v >= 0x80) {
    b->data[b->len++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  b->data[b->len++] = (uint8_t)v;
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

static void set_count(batch_t* b) {
  b->data[8] = (uint8_t)(b->count);
  b->data[9] = (uint8_t)(b->count >> 8);
  b->data[10] = (uint8_t)(b->count >> 16);
  b->data[11] = (uint8_t)(b->count >> 24);
}

static void batch_put(batch_t* b, const char* k, const char* v) {
  b->data[b->len++] = SHALE_BATCH_PUT;
  put_varstring(b, k, strlen(k));
  put_varstring(b, v, strlen(v));
  b->count++;
  set_count(b);
}

static void batch_delete(batch_t* b, const char* k) {
  b->data[b->len++] = SHALE_BATCH_DELETE;
  put_varstring(b, k, strlen(k));
  b->count++;
  set_count(b);
}

static void batch_delete_range(batch_t* b, const char* begin, const char* end) {
  b->data[b->len++] = SHALE_BATCH_DELETE_RANGE;
  put_varstring(b, begin, strlen(begin));
  put_varstring(b, end, strlen(end));
  b->count++;
  set_count(b);
}

static uint32_t fixed32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

/* Reads key into buf; returns the status code. */
static int32_t get(shale_db_t* db, const shale_snapshot_t* snap,
                   const char* key, char* buf, size_t cap, size_t* len) {
  shale_read_options_t ro;
  shale_read_options_init(&ro);
  ro.snapshot = snap;
  shale_status_t st = shale_get(db, &ro, (const uint8_t*)key, strlen(key),
                                (uint8_t*)buf, cap, len);
  shale_free(st.message);
  return st.code;
}

static void check_get(shale_db_t* db, const shale_snapshot_t* snap,
                      const char* key, const char* want, int line) {
  char buf[256];
  size_t len = 0;
  int32_t code = get(db, snap, key, buf, sizeof(buf), &len);
  if (want == NULL) {
    if (code != SHALE_NOT_FOUND) {
      fprintf(stderr, "%s:%d: %s: get(%s): code %d, want NOT_FOUND\n", __FILE__,
              line, phase, key, code);
      failures++;
    }
    return;
  }
  if (code != SHALE_OK || len != strlen(want) || memcmp(buf, want, len) != 0) {
    fprintf(stderr, "%s:%d: %s: get(%s): code %d value '%.*s', want '%s'\n",
            __FILE__, line, phase, key, code, (int)len, buf, want);
    failures++;
  }
}
#define CHECK_GET(db, snap, key, want) check_get(db, snap, key, want, __LINE__)

/* Scans the whole DB through next_batch into "k=v,k=v". */
static void scan(shale_db_t* db, uint32_t flags, size_t cap, char* out) {
  shale_read_options_t ro;
  shale_iterator_t* it = NULL;
  uint8_t buf[512];
  uint8_t valid = 1;
  out[0] = '\0';
  shale_read_options_init(&ro);
  CHECK_OK(shale_iter_new(db, &ro, NULL, 0, NULL, 0, &it));
  if (flags & SHALE_ITER_REVERSE) {
    shale_iter_seek_to_last(it);
  } else {
    shale_iter_seek_to_first(it);
  }
  while (valid) {
    size_t n = 0, used = 0, off = 0, i;
    CHECK_OK(
        shale_iter_next_batch(it, flags, 1000, buf, cap, &n, &used, &valid));
    for (i = 0; i < n; i++) {
      uint32_t kl = fixed32(buf + off), vl = fixed32(buf + off + 4);
      if (out[0] != '\0') strcat(out, ",");
      strncat(out, (const char*)buf + off + 8, kl);
      strcat(out, "=");
      strncat(out, (const char*)buf + off + 8 + kl, vl);
      off += 8 + kl + vl;
    }
    CHECK(off == used);
    if (n == 0) break;
  }
  shale_iter_free(it);
}

static void mkdirs(const char* path) {
  char tmp[1024];
  size_t i;
  snprintf(tmp, sizeof(tmp), "%s", path);
  for (i = 1; tmp[i] != '\0'; i++) {
    if (tmp[i] == '/') {
      tmp[i] = '\0';
      mkdir(tmp, 0755);
      tmp[i] = '/';
    }
  }
}

int main(int argc, char** argv) {
  char dbname[1024];
  shale_options_t opts;
  shale_write_options_t wo;
  shale_read_options_t ro;
  shale_db_t* db = NULL;
  batch_t b;
  char out[4096];

  if (argc != 2) {
    fprintf(stderr, "usage: %s <scratch directory>\n", argv[0]);
    return 2;
  }
  snprintf(dbname, sizeof(dbname), "%s/db", argv[1]);
  mkdirs(dbname);
  CHECK_OK(shale_destroy(dbname));

  phase = "version";
  CHECK(strncmp(shale_version(), "shale-engine ", 13) == 0);

  phase = "open";
  shale_options_init(&opts);
  CHECK(opts.create_if_missing == 1);
  CHECK(opts.write_buffer_size == 64u << 20);
  CHECK(opts.num_levels == 7);
  opts.create_if_missing = 0;
  CHECK_CODE(shale_open(&opts, dbname, &db), SHALE_INVALID_ARGUMENT);
  CHECK(db == NULL);
  opts.create_if_missing = 1;
  opts.num_levels = 42;
  CHECK_CODE(shale_open(&opts, dbname, &db), SHALE_INVALID_ARGUMENT);
  opts.num_levels = 7;
  CHECK_OK(shale_open(&opts, dbname, &db));
  if (db == NULL) return 1;

  phase = "write";
  memset(&wo, 0, sizeof(wo));
  batch_init(&b);
  batch_put(&b, "apple", "red");
  batch_put(&b, "banana", "yellow");
  batch_put(&b, "cherry", "dark");
  batch_put(&b, "date", "brown");
  batch_delete(&b, "cherry");
  CHECK_OK(shale_write(db, &wo, b.data, b.len));
  CHECK_GET(db, NULL, "apple", "red");
  CHECK_GET(db, NULL, "cherry", NULL);

  phase = "malformed batch";
  batch_init(&b);
  batch_put(&b, "x", "y");
  CHECK_CODE(shale_write(db, &wo, b.data, b.len - 1), SHALE_CORRUPTION);
  b.data[SHALE_BATCH_HEADER_SIZE] = 0x42; /* unknown tag */
  CHECK_CODE(shale_write(db, &wo, b.data, b.len), SHALE_CORRUPTION);
  CHECK_GET(db, NULL, "x", NULL);

  phase = "get buffer";
  {
    char small[3];
    size_t len = 0;
    CHECK(get(db, NULL, "banana", small, sizeof(small), &len) ==
          SHALE_BUFFER_TOO_SMALL);
    CHECK(len == 6);
    CHECK(get(db, NULL, "banana", NULL, 0, &len) == SHALE_BUFFER_TOO_SMALL);
    CHECK(len == 6);
  }

  phase = "snapshot";
  {
    const shale_snapshot_t* snap = shale_snapshot_new(db);
    CHECK(snap != NULL);
    CHECK(shale_snapshot_sequence(snap) == 5);
    batch_init(&b);
    batch_put(&b, "apple", "green");
    batch_delete_range(&b, "b", "d");
    wo.sync = 1;
    CHECK_OK(shale_write(db, &wo, b.data, b.len));
    wo.sync = 0;
    CHECK_GET(db, NULL, "apple", "green");
    CHECK_GET(db, NULL, "banana", NULL);
    CHECK_GET(db, snap, "apple", "red");
    CHECK_GET(db, snap, "banana", "yellow");
    /* Close refuses while the snapshot is held, and keeps the DB open. */
    CHECK_CODE(shale_close(db), SHALE_INVALID_ARGUMENT);
    shale_snapshot_release(db, snap);
  }

  phase = "multi_get";
  {
    const char keys[] = "appledatezzz";
    size_t key_offsets[] = {0, 5, 9, 12};
    uint8_t values[64];
    size_t value_offsets[3], value_lens[3];
    int32_t statuses[3];
    shale_read_options_init(&ro);
    CHECK_OK(shale_multi_get(db, &ro, 3, (const uint8_t*)keys, key_offsets,
                             values, sizeof(values), value_offsets, value_lens,
                             statuses));
    CHECK(statuses[0] == SHALE_OK && value_lens[0] == 5 &&
          memcmp(values + value_offsets[0], "green", 5) == 0);
    CHECK(statuses[1] == SHALE_OK && value_lens[1] == 5 &&
          memcmp(values + value_offsets[1], "brown", 5) == 0);
    CHECK(statuses[2] == SHALE_NOT_FOUND);
    /* Only the first value fits. */
    CHECK_OK(shale_multi_get(db, &ro, 3, (const uint8_t*)keys, key_offsets,
                             values, 7, value_offsets, value_lens, statuses));
    CHECK(statuses[0] == SHALE_OK);
    CHECK(statuses[1] == SHALE_BUFFER_TOO_SMALL && value_lens[1] == 5);
  }

  phase = "iterate";
  scan(db, 0, sizeof(out) > 512 ? 512 : sizeof(out), out);
  CHECK(strcmp(out, "apple=green,date=brown") == 0);
  scan(db, SHALE_ITER_REVERSE, 512, out);
  CHECK(strcmp(out, "date=brown,apple=green") == 0);
  scan(db, SHALE_ITER_KEYS_ONLY, 512, out);
  CHECK(strcmp(out, "apple=,date=") == 0);
  scan(db, 0, 20, out); /* one entry per call */
  CHECK(strcmp(out, "apple=green,date=brown") == 0);
  {
    shale_iterator_t* it = NULL;
    uint8_t buf[8];
    size_t n = 9, used = 0;
    uint8_t valid = 0;
    shale_read_options_init(&ro);
    CHECK_OK(shale_iter_new(db, &ro, (const uint8_t*)"b", 1,
                            (const uint8_t*)"e", 1, &it));
    shale_iter_seek(it, (const uint8_t*)"a", 1);
    CHECK_CODE(
        shale_iter_next_batch(it, 0, 10, buf, sizeof(buf), &n, &used, &valid),
        SHALE_BUFFER_TOO_SMALL);
    CHECK(n == 0 && used == 8 + 4 + 5 && valid == 1);
    shale_iter_seek_for_prev(it, (const uint8_t*)"z", 1);
    shale_iter_free(it);
  }

  phase = "stats";
  {
    shale_stats_t st;
    char* prop;
    CHECK_OK(shale_get_stats(db, &st));
    CHECK(st.user_keys_written == 7);
    CHECK(st.wal_syncs == 1);
    CHECK(st.last_sequence == 7);
    CHECK(st.num_levels == 7);
    CHECK(st.background_error == SHALE_OK);
    prop = shale_get_property(db, "shale.stats");
    CHECK(prop != NULL && strstr(prop, "shale.user.keys.written: 7") != NULL);
    shale_free(prop);
    CHECK(shale_get_property(db, "no.such.property") == NULL);
  }

  phase = "reopen";
  CHECK_OK(shale_close(db));
  db = NULL;
  CHECK_OK(shale_open(&opts, dbname, &db));
  CHECK_GET(db, NULL, "apple", "green");
  CHECK_GET(db, NULL, "date", "brown");
  CHECK_GET(db, NULL, "banana", NULL);
  {
    shale_db_t* second = NULL;
    CHECK_CODE(shale_open(&opts, dbname, &second), SHALE_IO_ERROR);
    CHECK(second == NULL);
  }
  CHECK_OK(shale_wait_for_compaction(db));
  CHECK_OK(shale_resume(db));

  phase = "flush and compact";
  CHECK_OK(shale_flush(db, 1));
  CHECK_OK(shale_compact_range(db, NULL, 0, NULL, 0));
  CHECK_OK(shale_wait_for_compaction(db));
  CHECK_GET(db, NULL, "apple", "green");
  {
    shale_stats_t st;
    uint64_t bytes = 0, keys = 0;
    CHECK_OK(shale_get_stats(db, &st));
    CHECK(st.live_sst_bytes > 0);
    CHECK(st.flush_bytes_written > 0);
    CHECK_OK(shale_approximate_size(db, (const uint8_t*)"a", 1,
                                    (const uint8_t*)"z", 1, &bytes, &keys));
    CHECK(bytes > 0);
  }

  phase = "sst writer and ingest";
  {
    char sst[1100];
    shale_sst_writer_t* w = NULL;
    uint64_t size = 0;
    const char* paths[1];
    uint8_t entries[64];
    size_t n = 0;
    snprintf(sst, sizeof(sst), "%s/ext.sst", argv[1]);
    CHECK_OK(shale_sst_writer_open(&opts, sst, &w));
    CHECK_OK(shale_sst_writer_put(w, (const uint8_t*)"elder", 5,
                                  (const uint8_t*)"berry", 5));
    CHECK_CODE(shale_sst_writer_put(w, (const uint8_t*)"aaa", 3,
                                    (const uint8_t*)"x", 1),
               SHALE_INVALID_ARGUMENT);
    /* one entry in the next_batch encoding: "fig" -> "purple" */
    entries[n++] = 3;
    entries[n++] = 0;
    entries[n++] = 0;
    entries[n++] = 0;
    entries[n++] = 6;
    entries[n++] = 0;
    entries[n++] = 0;
    entries[n++] = 0;
    memcpy(entries + n, "figpurple", 9);
    n += 9;
    CHECK_OK(shale_sst_writer_add_entries(w, entries, n));
    CHECK_CODE(shale_sst_writer_add_entries(w, entries, n - 1),
               SHALE_INVALID_ARGUMENT);
    CHECK_OK(shale_sst_writer_delete_range(w, (const uint8_t*)"d", 1,
                                           (const uint8_t*)"e", 1));
    CHECK_OK(shale_sst_writer_finish(w, &size));
    CHECK(size > 0);
    shale_sst_writer_free(w);
    paths[0] = sst;
    CHECK_OK(shale_ingest(db, 1, paths));
    CHECK_GET(db, NULL, "elder", "berry");
    CHECK_GET(db, NULL, "fig", "purple");
    CHECK_GET(db, NULL, "date", NULL); /* under the file's tombstone */
    CHECK_GET(db, NULL, "apple", "green");
  }

  phase = "checkpoint";
  {
    char cp[1100];
    shale_db_t* copy = NULL;
    snprintf(cp, sizeof(cp), "%s/checkpoint", argv[1]);
    CHECK_OK(shale_destroy(cp));
    CHECK_OK(shale_checkpoint(db, cp));
    CHECK_CODE(shale_checkpoint(db, cp), SHALE_INVALID_ARGUMENT);
    CHECK_OK(shale_open(&opts, cp, &copy));
    if (copy != NULL) {
      CHECK_GET(copy, NULL, "fig", "purple");
      CHECK_OK(shale_close(copy));
    }
    CHECK_OK(shale_destroy(cp));
  }

  phase = "null arguments";
  CHECK_CODE(shale_write(db, &wo, NULL, 12), SHALE_INVALID_ARGUMENT);
  CHECK_CODE(shale_close(NULL), SHALE_INVALID_ARGUMENT);

  phase = "close";
  CHECK_OK(shale_close(db));
  CHECK_OK(shale_destroy(dbname));

  if (failures > 0) {
    fprintf(stderr, "c_api_test: %d failure(s)\n", failures);
    return 1;
  }
  fprintf(stderr, "c_api_test: PASS\n");
  return 0;
}
