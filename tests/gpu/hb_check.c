/* hb_check.c: vector clocks over the mock runtime's stream-ordering log (hb_check.h states the
 * model). Two passes: the first names the streams and events (handles -> dense indices) and
 * numbers the nodes per stream; the second replays the log in issue order with
 *   row[s]  per stream s: the clock an action issued to s next would start with (row[s][s] is
 *           the number of s's nodes issued so far: each completes before the next starts);
 *   host    what the host has waited for (joined into every stream at its next action);
 *   latest  per event: the entry of its most recent record so far;
 * and stores each node's clock at its start. "a before b" is then clock(b)[stream(a)] >= seq(a).
 * Joins are element-wise maxima. Used by tests only (C11, no CUDA library needed).
 */
#include "hb_check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define LEGACY 0u /* the legacy default stream is stream 0 */

/* Open addressing over pointer-sized keys; val NONE marks an empty slot. */
typedef struct {
  uintptr_t *key;
  uint32_t *val;
  size_t mask;
} ptrmap;

static int map_init(ptrmap *m, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n + 2) cap <<= 1;
  m->key = malloc(cap * sizeof *m->key);
  m->val = malloc(cap * sizeof *m->val);
  m->mask = cap - 1;
  if (!m->key || !m->val) return 0;
  memset(m->val, 0xff, cap * sizeof *m->val);
  return 1;
}
static void map_free(ptrmap *m) {
  free(m->key);
  free(m->val);
}
/* The slot of key k: where it is, or the empty slot where it would go. */
static size_t map_slot(const ptrmap *m, uintptr_t k) {
  size_t i = (size_t)(((uint64_t)k * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & m->mask;
  while (m->val[i] != NONE && m->key[i] != k) i = (i + 1) & m->mask;
  return i;
}

struct hb_graph {
  size_t n, nstreams;
  uint32_t *sidx;  /* per entry: its stream's index (NONE: no stream) */
  uint32_t *seq;   /* per entry: its place among its stream's nodes, from 1 (0: not a node) */
  uint32_t *node;  /* per entry: its row of clock (NONE: not a node) */
  uint32_t *clock; /* per node, nstreams counters: the start clock */
  ptrmap events;   /* event handle -> event index */
  uint32_t *nrec;  /* per event: how many records */
  uint32_t *lastrec; /* per event: the entry of its last record (NONE: none) */
};

static int is_node(mock_op_kind k) { return k == MOCK_OP_WORK || k == MOCK_OP_RECORD; }
static int has_stream(mock_op_kind k) {
  return k == MOCK_OP_WORK || k == MOCK_OP_RECORD || k == MOCK_OP_WAIT ||
         k == MOCK_OP_STREAM_SYNC || k == MOCK_OP_STREAM_CREATE;
}
static int has_event(mock_op_kind k) {
  return k == MOCK_OP_RECORD || k == MOCK_OP_WAIT || k == MOCK_OP_EVENT_SYNC;
}

/* Pass 1: stream and event indices, per-stream node numbers, records per event. `eidx` (per
 * entry) and `blocking` (per stream, at least n + 1 entries) are the caller's. */
static int name_entries(hb_graph *g, const mock_cuda_op *ops, uint32_t *eidx,
                        unsigned char *blocking, size_t *nevents, size_t *nnodes) {
  ptrmap streams;
  if (!map_init(&streams, g->n)) {
    map_free(&streams);
    return 0;
  }
  uint32_t *count = calloc(g->n + 1, sizeof *count); /* nodes issued per stream */
  if (!count) {
    map_free(&streams);
    return 0;
  }
  size_t ns = 1, ne = 0, nn = 0; /* stream 0: the legacy stream */
  blocking[LEGACY] = 1;
  for (size_t i = 0; i < g->n; i++) {
    const mock_cuda_op *op = &ops[i];
    g->sidx[i] = g->node[i] = eidx[i] = NONE;
    g->seq[i] = 0;
    if (has_stream(op->kind)) {
      const uintptr_t h = (uintptr_t)op->stream;
      uint32_t s = LEGACY;
      if (op->stream != 0 && op->stream != (const void *)cudaStreamLegacy) {
        const size_t slot = map_slot(&streams, h);
        if (streams.val[slot] == NONE || op->kind == MOCK_OP_STREAM_CREATE) {
          streams.key[slot] = h;
          streams.val[slot] = (uint32_t)ns;
          blocking[ns] = !(op->flags & cudaStreamNonBlocking);
          ns++;
        }
        s = streams.val[slot];
      }
      g->sidx[i] = s;
      if (is_node(op->kind)) g->seq[i] = ++count[s], g->node[i] = (uint32_t)nn++;
    }
    if (has_event(op->kind)) {
      const size_t slot = map_slot(&g->events, (uintptr_t)op->event);
      if (g->events.val[slot] == NONE) {
        g->events.key[slot] = (uintptr_t)op->event;
        g->events.val[slot] = (uint32_t)ne;
        g->nrec[ne] = 0, g->lastrec[ne] = NONE;
        ne++;
      }
      eidx[i] = g->events.val[slot];
      if (op->kind == MOCK_OP_RECORD) g->nrec[eidx[i]]++, g->lastrec[eidx[i]] = (uint32_t)i;
    }
  }
  free(count);
  map_free(&streams);
  g->nstreams = ns;
  *nevents = ne;
  *nnodes = nn;
  return 1;
}

static void join(uint32_t *dst, const uint32_t *src, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (src[k] > dst[k]) dst[k] = src[k];
}

/* What the record at entry r captured, joined into dst: the record's start clock and the record
 * itself (everything before it on its stream). */
static void join_record(const hb_graph *g, uint32_t *dst, uint32_t r) {
  join(dst, g->clock + (size_t)g->node[r] * g->nstreams, g->nstreams);
  if (g->seq[r] > dst[g->sidx[r]]) dst[g->sidx[r]] = g->seq[r];
}

/* Before an action (work, record, wait) on stream s: what the host waited for, and CUDA's
 * implicit synchronisation between the legacy stream and the blocking streams. */
static void before_action(const hb_graph *g, uint32_t *row, const uint32_t *host,
                          const unsigned char *blocking, uint32_t s) {
  const size_t S = g->nstreams;
  uint32_t *rs = row + (size_t)s * S;
  join(rs, host, S);
  if (s == LEGACY) {
    for (size_t b = 1; b < S; b++)
      if (blocking[b]) join(rs, row + b * S, S);
  } else if (blocking[s]) {
    join(rs, row + (size_t)LEGACY * S, S);
  }
}

/* Pass 2: replay the log. */
static void replay(hb_graph *g, const mock_cuda_op *ops, const uint32_t *eidx,
                   const unsigned char *blocking, uint32_t *row, uint32_t *host,
                   uint32_t *latest) {
  const size_t S = g->nstreams;
  for (size_t i = 0; i < g->n; i++) {
    const uint32_t s = g->sidx[i], e = eidx[i];
    uint32_t *rs = s == NONE ? NULL : row + (size_t)s * S;
    switch (ops[i].kind) {
    case MOCK_OP_WORK:
    case MOCK_OP_RECORD:
      before_action(g, row, host, blocking, s);
      memcpy(g->clock + (size_t)g->node[i] * S, rs, S * sizeof *rs);
      rs[s] = g->seq[i];
      if (ops[i].kind == MOCK_OP_RECORD) latest[e] = (uint32_t)i;
      break;
    case MOCK_OP_WAIT:
      before_action(g, row, host, blocking, s);
      if (latest[e] != NONE) join_record(g, rs, latest[e]);
      break;
    case MOCK_OP_STREAM_SYNC: join(host, rs, S); break;
    case MOCK_OP_EVENT_SYNC:
      if (latest[e] != NONE) join_record(g, host, latest[e]);
      break;
    case MOCK_OP_DEVICE_SYNC:
      for (size_t t = 0; t < S; t++) join(host, row + t * S, S);
      break;
    default: break; /* STREAM_CREATE: a new stream starts empty (pass 1) */
    }
  }
}

hb_graph *hb_build(const mock_cuda_op *ops, size_t n) {
  if (n >= NONE) return NULL;
  hb_graph *g = calloc(1, sizeof *g), *built = NULL;
  uint32_t *eidx = malloc((n + 1) * sizeof *eidx), *row = NULL, *host = NULL, *latest = NULL;
  unsigned char *blocking = malloc(n + 1);
  size_t nevents = 0, nnodes = 0, S = 0;
  if (!g || !eidx || !blocking) goto done;
  g->n = n;
  g->sidx = malloc((n + 1) * sizeof *g->sidx);
  g->seq = malloc((n + 1) * sizeof *g->seq);
  g->node = malloc((n + 1) * sizeof *g->node);
  g->nrec = malloc((n + 1) * sizeof *g->nrec);
  g->lastrec = malloc((n + 1) * sizeof *g->lastrec);
  if (!g->sidx || !g->seq || !g->node || !g->nrec || !g->lastrec || !map_init(&g->events, n) ||
      !name_entries(g, ops, eidx, blocking, &nevents, &nnodes))
    goto done;
  S = g->nstreams;
  if ((nnodes && S > SIZE_MAX / sizeof(uint32_t) / nnodes) || S > SIZE_MAX / sizeof(uint32_t) / S)
    goto done;
  g->clock = malloc((nnodes * S + 1) * sizeof *g->clock);
  row = calloc(S * S, sizeof *row);
  host = calloc(S, sizeof *host);
  latest = malloc((nevents + 1) * sizeof *latest);
  if (!g->clock || !row || !host || !latest) goto done;
  memset(latest, 0xff, (nevents + 1) * sizeof *latest);
  replay(g, ops, eidx, blocking, row, host, latest);
  built = g, g = NULL;
done:
  free(eidx), free(blocking), free(row), free(host), free(latest);
  hb_free(g);
  return built;
}

void hb_free(hb_graph *g) {
  if (!g) return;
  free(g->sidx), free(g->seq), free(g->node), free(g->clock), free(g->nrec), free(g->lastrec);
  map_free(&g->events);
  free(g);
}

int hb_before(const hb_graph *g, size_t a, size_t b) {
  if (!g || a >= g->n || b >= g->n || g->node[a] == NONE || g->node[b] == NONE) return 0;
  return g->clock[(size_t)g->node[b] * g->nstreams + g->sidx[a]] >= g->seq[a];
}

ptrdiff_t hb_record_of(const hb_graph *g, const void *event) {
  if (!g) return -1;
  const size_t slot = map_slot(&g->events, (uintptr_t)event);
  if (g->events.val[slot] == NONE) return -1;
  const uint32_t e = g->events.val[slot];
  return g->nrec[e] == 0 ? -1 : g->nrec[e] > 1 ? -2 : (ptrdiff_t)g->lastrec[e];
}
