/* fleetload: replays a fleet's schedule of RocketMQ remoting frames over many kept connections (benchmarks/fleet.py).
 *
 *   fleetload HOST PORT[,PORT...] FRAMES SCHEDULE T0 INTERVAL NINTERVALS NTYPES DRAIN TIMEOUTS
 *
 * With several ports (one-worker servers on ports of their own, as benchmarks/stall_bench.py starts them),
 * connection i goes to the (i mod n)-th: the fleet is spread over them as a shared port's kernel would spread it.
 * SIGUSR1 ends the schedule early (the bench beside it is done): no more sends, then the drain and the report.
 * FRAMES holds complete frames, each with its 4-byte length prefix and a JSON header whose "opaque" has 10 digits:
 * each request gets its own opaque (patched into its copy), so replies are matched to requests in any order.
 * SCHEDULE holds fixed-size records (struct rec below), each a connect, a close, or a send repeated every `period`
 * seconds from `start` while before `end` (period 0: once). Times are seconds after T0 on CLOCK_MONOTONIC (the
 * driver's time.monotonic()). A connect record sets the connection's window (requests in flight at most, as a
 * stock client waits for each synchronous call: `frame`, 0 = no limit) and how many due requests may wait for it
 * (`pad`; more are skipped, as a client's scheduled task that is still busy). TIMEOUTS: seconds per request type,
 * comma-separated: a request unanswered that long is given up (counted, its window slot freed; a reply after it
 * is counted late). Latency runs from when a request was due to its reply, waiting for the window included; the
 * tool's own lag behind the schedule is reported apart. At the end (after the last send, at most DRAIN seconds more for replies) it prints
 * one JSON document: per request type, and per type and interval of INTERVAL seconds (by due time), requests sent,
 * replies by response code, latency percentiles, requests given up and not made; requests left without a reply (their connection closed by the
 * server, or still waiting); connections; the tool's own CPU seconds. One thread, epoll, non-blocking connects.
 * Compiled by benchmarks/fleet.py with the system's cc; loopback only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { OP_SEND = 0, OP_CONNECT = 1, OP_CLOSE = 2, OP_ONEWAY = 3 };
enum { C_NONE = 0, C_CONNECTING, C_OPEN, C_DROPPED, C_CLOSED };

#pragma pack(push, 1)
struct rec { /* 36 bytes, little endian: struct.pack("<dddIIBBH") in fleet.py */
    double start, period, end;
    uint32_t conn, frame;
    uint8_t type, op;
    uint16_t pad;
};
#pragma pack(pop)

#define NB 1056        /* latency buckets: exact below 64 us, then 32 per power of two (~3 %) */
#define NCODES 6       /* distinct response codes kept per (type, interval); the rest counted as other */
#define RING (1 << 20) /* requests awaiting a reply, by sequence number (older ones count as unanswered) */
#define MAXTYPES 16

typedef struct {
    int fd, state, inflight, want_out;
    uint32_t gen; /* opened how many times: a reply belongs to the connection its request went out on */
    uint32_t window, qcap, qhead, qlen; /* in flight at most (0: no limit); due requests waiting for the window */
    uint32_t *qrec;
    double *qdue;
    unsigned char *in, *out;
    size_t in_len, in_cap, out_len, out_off, out_cap;
} conn_t;

typedef struct {
    long sent, replies, other_codes, timed_out, skipped; /* skipped: not made (window full, connection closed) */
    int code[NCODES];
    long code_n[NCODES];
    uint32_t *hist; /* NB buckets, allocated on first reply */
} cell_t;

typedef struct {
    uint64_t seq;
    double due, sent;
    uint32_t conn, gen;
    uint16_t type, interval;
    uint8_t used;
} pending_t;

static unsigned char **frame_ptr;
static size_t *frame_len, *opaque_at, nframes;
static struct rec *recs;
static double *next_at;
static size_t nrecs;
static conn_t *conns;
static size_t nconns;
static cell_t *cells;
static int ntypes, nintervals;
static double interval_s, t0;
static pending_t *ring;
static uint64_t seq;
static long connects, connect_errors, dropped_by_server, unmatched, server_requests, overflow;
static long reconnects[MAXTYPES], no_reply[MAXTYPES], no_reply_dropped[MAXTYPES], send_skipped[MAXTYPES];
static long timed_out[MAXTYPES], late[MAXTYPES], window_skipped[MAXTYPES];
static double timeout_s[MAXTYPES];
static uint32_t *tfifo[MAXTYPES]; /* per type, the requests in the order they went out: their deadlines, in order */
static uint64_t thead[MAXTYPES], ttail[MAXTYPES];
static uint32_t lag_hist[NB];
static double lag_max;
static int ep;
static struct sockaddr_in *addrs;
static size_t naddrs;
static volatile sig_atomic_t ending; /* SIGUSR1: end the schedule now */

static void on_usr1(int sig) { (void)sig; ending = 1; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int bucket(double seconds) {
    uint64_t us = seconds <= 0 ? 0 : (uint64_t)(seconds * 1e6);
    if (us < 64) return (int)us;
    int e = 63 - __builtin_clzll(us);
    if (e > 36) return NB - 1;
    int shift = e - 5;
    return 64 + (e - 6) * 32 + (int)((us >> shift) - 32);
}

static double bucket_ms(int b) {
    if (b < 64) return b / 1000.0;
    int e = (b - 64) / 32 + 6, shift = e - 5;
    uint64_t lo = (uint64_t)((b - 64) % 32 + 32) << shift;
    return (lo + (1ULL << shift) / 2.0) / 1000.0;
}

static double hist_pct(const uint32_t *h, double p) {
    uint64_t n = 0;
    for (int b = 0; b < NB; b++) n += h[b];
    if (!n) return -1;
    uint64_t want = (uint64_t)(p / 100.0 * (n - 1)) + 1, acc = 0;
    for (int b = 0; b < NB; b++) {
        acc += h[b];
        if (acc >= want) return bucket_ms(b);
    }
    return bucket_ms(NB - 1);
}

static double hist_max(const uint32_t *h) {
    for (int b = NB - 1; b >= 0; b--)
        if (h[b]) return bucket_ms(b);
    return -1;
}

static cell_t *cell(int type, int interval) { return &cells[(size_t)type * nintervals + interval]; }

static void count_code(cell_t *c, int code, long n) {
    for (int i = 0; i < NCODES; i++) {
        if (c->code_n[i] && c->code[i] == code) { c->code_n[i] += n; return; }
        if (!c->code_n[i]) { c->code[i] = code; c->code_n[i] = n; return; }
    }
    c->other_codes += n;
}

/* ------------------------------------------------------------------ frames and schedule */

static unsigned char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n ? n : 1);
    if (fread(buf, 1, n, f) != (size_t)n) { perror(path); exit(2); }
    fclose(f);
    *size = n;
    return buf;
}

static void load_frames(const char *path) {
    size_t size, cap = 1024;
    unsigned char *all = slurp(path, &size);
    frame_ptr = malloc(cap * sizeof *frame_ptr);
    frame_len = malloc(cap * sizeof *frame_len);
    opaque_at = malloc(cap * sizeof *opaque_at);
    for (size_t off = 0; off + 8 <= size;) {
        unsigned char *p = all + off;
        uint32_t total = (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
        uint32_t hl = (uint32_t)p[5] << 16 | p[6] << 8 | p[7];
        if (nframes == cap) {
            cap *= 2;
            frame_ptr = realloc(frame_ptr, cap * sizeof *frame_ptr);
            frame_len = realloc(frame_len, cap * sizeof *frame_len);
            opaque_at = realloc(opaque_at, cap * sizeof *opaque_at);
        }
        unsigned char *hit = memmem(p + 8, hl, "\"opaque\":", 9);
        if (p[4] != 0 || !hit || hit + 19 > p + 8 + hl) {
            fprintf(stderr, "fleetload: frame %zu has no 10-digit JSON opaque\n", nframes);
            exit(2);
        }
        frame_ptr[nframes] = p;
        frame_len[nframes] = 4 + total;
        opaque_at[nframes++] = (size_t)(hit + 9 - p);
        off += 4 + total;
    }
}

/* ------------------------------------------------------------------ the schedule's heap (by next due time) */

static uint32_t *heap;
static size_t heap_n;

static void heap_push(uint32_t r) {
    size_t i = heap_n++;
    while (i && next_at[heap[(i - 1) / 2]] > next_at[r]) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = r;
}

static uint32_t heap_pop(void) {
    uint32_t top = heap[0], last = heap[--heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= heap_n) break;
        if (c + 1 < heap_n && next_at[heap[c + 1]] < next_at[heap[c]]) c++;
        if (next_at[heap[c]] >= next_at[last]) break;
        heap[i] = heap[c];
        i = c;
    }
    if (heap_n) heap[i] = last;
    return top;
}

/* ------------------------------------------------------------------ connections */

static void watch(conn_t *c, uint32_t id, int out) {
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.u32 = id};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = out;
}

static int open_conn(uint32_t id) {
    conn_t *c = &conns[id];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    connects++;
    struct sockaddr_in *addr = &addrs[id % naddrs];
    if (connect(fd, (struct sockaddr *)addr, sizeof *addr) < 0 && errno != EINPROGRESS) {
        connect_errors++;
        close(fd);
        c->state = C_DROPPED;
        return -1;
    }
    c->fd = fd;
    c->gen++;
    c->state = C_CONNECTING;
    c->in_len = c->out_len = c->out_off = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = id};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    c->want_out = 1;
    return 0;
}

static void drop(conn_t *c, int by_server) {
    if (c->state == C_NONE || c->state == C_DROPPED || c->state == C_CLOSED) return;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->state = by_server ? C_DROPPED : C_CLOSED;
    c->inflight = 0; /* their entries stay in the ring and are counted without a reply at the end */
    c->in_len = c->out_len = c->out_off = 0;
    if (by_server) dropped_by_server++;
}

static void flush(uint32_t id) {
    conn_t *c = &conns[id];
    if (c->state != C_OPEN) return;
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) {
            if (errno == EAGAIN) break;
            drop(c, 1);
            return;
        }
        c->out_off += n;
    }
    if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
    int pending = c->out_len > 0;
    if (pending != c->want_out) watch(c, id, pending);
}

static void queue_frame(conn_t *c, uint32_t f, uint64_t opaque) {
    size_t len = frame_len[f];
    if (c->out_len + len > c->out_cap) {
        if (c->out_off) {
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        if (c->out_len + len > c->out_cap) {
            c->out_cap = (c->out_len + len) * 2;
            c->out = realloc(c->out, c->out_cap);
        }
    }
    unsigned char *dst = c->out + c->out_len;
    memcpy(dst, frame_ptr[f], len);
    char digits[16];
    snprintf(digits, sizeof digits, "%010llu", (unsigned long long)opaque);
    memcpy(dst + opaque_at[f], digits, 10);
    c->out_len += len;
}

/* ------------------------------------------------------------------ firing the schedule */

static int interval_of(double due) {
    int i = (int)(due / interval_s);
    return i < 0 ? 0 : i >= nintervals ? nintervals - 1 : i;
}

static void send_now(uint32_t r, double due, double t);

static void fire(uint32_t r, double t) {
    struct rec *e = &recs[r];
    double due = next_at[r];
    double lag = t - (t0 + due);
    lag_hist[bucket(lag)]++;
    if (lag > lag_max) lag_max = lag;
    conn_t *c = &conns[e->conn];
    int type = e->type < ntypes ? e->type : ntypes - 1;
    if (e->op == OP_CONNECT) {
        if (c->state == C_OPEN || c->state == C_CONNECTING) drop(c, 0);
        c->window = e->frame;
        c->qcap = e->pad ? e->pad : 1;
        c->qrec = realloc(c->qrec, c->qcap * sizeof *c->qrec);
        c->qdue = realloc(c->qdue, c->qcap * sizeof *c->qdue);
        c->qhead = c->qlen = 0;
        open_conn(e->conn);
        return;
    }
    if (e->op == OP_CLOSE) {
        /* a broker shutting down closes after its last reply (UNREGISTER_BROKER is synchronous): wait up to 2 s */
        if (c->inflight > 0 && t - (t0 + e->start) < 2.0) {
            next_at[r] = t - t0 + 0.005;
            heap_push(r);
            return;
        }
        drop(c, 0);
        return;
    }
    if (e->op == OP_SEND && c->window && (uint32_t)c->inflight >= c->window) {
        if (c->qlen >= c->qcap) { /* the client is still waiting on earlier calls: this one is not made */
            window_skipped[type]++;
            cell(type, interval_of(due))->skipped++;
            return;
        }
        uint32_t k = (c->qhead + c->qlen++) % c->qcap;
        c->qrec[k] = r;
        c->qdue[k] = due;
        return;
    }
    send_now(r, due, t);
}

/* The request of record r, due at `due`: on its connection (reconnected if the server closed it). */
static void send_now(uint32_t r, double due, double t) {
    struct rec *e = &recs[r];
    conn_t *c = &conns[e->conn];
    int type = e->type < ntypes ? e->type : ntypes - 1;
    if (c->state != C_OPEN && c->state != C_CONNECTING) {
        if (c->state == C_DROPPED) reconnects[type]++; /* a stock client reconnects on its next call */
        if (c->state == C_CLOSED || open_conn(e->conn) < 0) {
            send_skipped[type]++;
            cell(type, interval_of(due))->skipped++;
            return;
        }
    }
    cell_t *ce = cell(type, interval_of(due));
    ce->sent++;
    uint64_t s = seq++;
    if (e->op == OP_SEND) {
        pending_t *p = &ring[s & (RING - 1)];
        if (p->used) { /* a million requests later and still no reply */
            overflow++;
            no_reply[p->type]++;
        }
        *p = (pending_t){.seq = s, .due = t0 + due, .sent = t, .conn = e->conn, .gen = c->gen, .type = type,
                         .interval = interval_of(due), .used = 1};
        c->inflight++;
        if (timeout_s[type] > 0) {
            if (ttail[type] - thead[type] >= RING) thead[type]++; /* the oldest is long answered or counted */
            tfifo[type][ttail[type]++ & (RING - 1)] = (uint32_t)(s & 0xffffffffu);
        }
    }
    queue_frame(c, e->frame, 1000000000ULL + s % 1000000000ULL);
    if (c->state == C_OPEN) flush(e->conn);
}

/* A slot of the connection's window came free: its waiting requests go out, oldest first. */
static void pump(uint32_t id, double t) {
    conn_t *c = &conns[id];
    while (c->qlen && (!c->window || (uint32_t)c->inflight < c->window)) {
        uint32_t r = c->qrec[c->qhead];
        double due = c->qdue[c->qhead];
        c->qhead = (c->qhead + 1) % c->qcap;
        c->qlen--;
        send_now(r, due, t);
    }
}

/* Requests unanswered past their type's timeout: given up, as the client does; their slots freed. */
static void expire_requests(double t) {
    for (int ty = 0; ty < ntypes; ty++) {
        if (timeout_s[ty] <= 0) continue;
        while (thead[ty] < ttail[ty]) {
            uint32_t low = tfifo[ty][thead[ty] & (RING - 1)];
            pending_t *p = &ring[low & (RING - 1)];
            if (!p->used || (uint32_t)(p->seq & 0xffffffffu) != low) { thead[ty]++; continue; }
            if (p->sent + timeout_s[ty] > t) break;
            p->used = 0;
            timed_out[ty]++;
            cell(ty, p->interval)->timed_out++;
            thead[ty]++;
            conn_t *c = &conns[p->conn];
            if (c->gen == p->gen && c->inflight > 0) {
                c->inflight--;
                pump(p->conn, t);
            }
        }
    }
}

/* ------------------------------------------------------------------ replies */

static long json_int(const unsigned char *h, uint32_t hl, const char *key) {
    size_t kl = strlen(key);
    const unsigned char *hit = memmem(h, hl, key, kl);
    if (!hit) return -1;
    return strtol((const char *)hit + kl, NULL, 10);
}

static void on_frame(uint32_t id, const unsigned char *p, uint32_t total, double t) {
    uint32_t hl = (uint32_t)p[5] << 16 | p[6] << 8 | p[7];
    if (hl + 4 > total) { unmatched++; return; }
    const unsigned char *h = p + 8;
    long code, opaque, flag;
    if (p[4] == 1) { /* ROCKETMQ binary header: code 2, language 1, version 2, opaque 4, flag 4 */
        if (hl < 13) { unmatched++; return; }
        code = (int16_t)(h[0] << 8 | h[1]);
        opaque = (long)((uint32_t)h[5] << 24 | h[6] << 16 | h[7] << 8 | h[8]);
        flag = (long)((uint32_t)h[9] << 24 | h[10] << 16 | h[11] << 8 | h[12]);
    } else {
        code = json_int(h, hl, "\"code\":");
        opaque = json_int(h, hl, "\"opaque\":");
        flag = json_int(h, hl, "\"flag\":");
    }
    if (!(flag & 1)) { server_requests++; return; } /* a request from the server (none expected) */
    if (opaque < 1000000000L) { unmatched++; return; }
    uint64_t s = (uint64_t)(opaque - 1000000000L);
    pending_t *pe = &ring[s & (RING - 1)];
    if (!pe->used || pe->seq % 1000000000ULL != s || pe->conn != id || pe->gen != conns[id].gen) {
        if (!pe->used && pe->seq % 1000000000ULL == s && pe->conn == id) late[pe->type]++; /* after its timeout */
        else unmatched++;
        return;
    }
    pe->used = 0;
    conns[id].inflight--;
    cell_t *ce = cell(pe->type, pe->interval);
    ce->replies++;
    count_code(ce, (int)code, 1);
    if (!ce->hist) ce->hist = calloc(NB, sizeof(uint32_t));
    ce->hist[bucket(t - pe->due)]++;
    pump(id, t);
}

static void on_readable(uint32_t id, double t) {
    conn_t *c = &conns[id];
    for (;;) {
        if (c->in_cap - c->in_len < 65536) {
            c->in_cap = c->in_cap ? c->in_cap * 2 : 262144;
            c->in = realloc(c->in, c->in_cap);
        }
        size_t want = c->in_cap - c->in_len;
        ssize_t r = read(c->fd, c->in + c->in_len, want);
        if (r < 0 && errno == EAGAIN) break;
        if (r <= 0) {
            drop(c, 1);
            return;
        }
        c->in_len += r;
        size_t pos = 0;
        while (c->in_len - pos >= 8) {
            unsigned char *p = c->in + pos;
            uint32_t total = (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
            if (c->in_len - pos < 4 + (size_t)total) {
                if (4 + (size_t)total > c->in_cap) { /* a big reply (cluster info, topic list): make room */
                    c->in_cap = 4 + (size_t)total + 65536;
                    c->in = realloc(c->in, c->in_cap);
                }
                break;
            }
            on_frame(id, p, total, t);
            pos += 4 + total;
            if (c->state != C_OPEN) return;
        }
        if (pos) {
            memmove(c->in, c->in + pos, c->in_len - pos);
            c->in_len -= pos;
        }
        if ((size_t)r < want) break; /* drained for now */
    }
}

static void on_writable(uint32_t id) {
    conn_t *c = &conns[id];
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t l = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
        if (err) {
            connect_errors++;
            drop(c, 1);
            return;
        }
        c->state = C_OPEN;
    }
    flush(id);
}

/* ------------------------------------------------------------------ report */

static void print_codes(const cell_t *c) {
    printf("{");
    int first = 1;
    for (int i = 0; i < NCODES; i++)
        if (c->code_n[i]) {
            printf("%s\"%d\":%ld", first ? "" : ",", c->code[i], c->code_n[i]);
            first = 0;
        }
    if (c->other_codes) printf("%s\"other\":%ld", first ? "" : ",", c->other_codes);
    printf("}");
}

static void print_lat(const uint32_t *h) {
    if (!h) { printf("\"p50_ms\":null,\"p99_ms\":null,\"max_ms\":null"); return; }
    printf("\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f", hist_pct(h, 50), hist_pct(h, 90),
           hist_pct(h, 99), hist_max(h));
}

static void report(double elapsed) {
    for (size_t i = 0; i < nconns; i++)
        for (uint32_t k = 0; k < conns[i].qlen; k++) {
            struct rec *e = &recs[conns[i].qrec[(conns[i].qhead + k) % conns[i].qcap]];
            window_skipped[e->type < ntypes ? e->type : ntypes - 1]++;
        }
    for (size_t i = 0; i < RING; i++)
        if (ring[i].used) {
            int ty = ring[i].type;
            conn_t *c = &conns[ring[i].conn];
            if (c->state == C_DROPPED || c->gen != ring[i].gen) no_reply_dropped[ty]++; else no_reply[ty]++;
        }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    printf("{\"cpu_s\":%.3f,\"elapsed_s\":%.3f,\"max_rss_kb\":%ld,\"connects\":%ld,\"connect_errors\":%ld,"
           "\"dropped_by_server\":%ld,\"unmatched\":%ld,\"server_requests\":%ld,\"ring_overflow\":%ld,"
           "\"lag_ms\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f},\"types\":[",
           cpu, elapsed, ru.ru_maxrss, connects, connect_errors, dropped_by_server, unmatched, server_requests,
           overflow, hist_pct(lag_hist, 50), hist_pct(lag_hist, 99), lag_max * 1000);
    uint32_t *sum = calloc(NB, sizeof(uint32_t));
    for (int ty = 0; ty < ntypes; ty++) {
        cell_t all = {0};
        memset(sum, 0, NB * sizeof(uint32_t));
        int any = 0;
        for (int iv = 0; iv < nintervals; iv++) {
            cell_t *c = cell(ty, iv);
            all.sent += c->sent;
            all.replies += c->replies;
            all.other_codes += c->other_codes;
            for (int k = 0; k < NCODES; k++)
                if (c->code_n[k]) count_code(&all, c->code[k], c->code_n[k]);
            if (c->hist) {
                any = 1;
                for (int b = 0; b < NB; b++) sum[b] += c->hist[b];
            }
        }
        printf("%s{\"sent\":%ld,\"replies\":%ld,\"no_reply\":%ld,\"no_reply_dropped\":%ld,\"reconnects\":%ld,"
               "\"skipped\":%ld,\"timed_out\":%ld,\"late\":%ld,\"window_skipped\":%ld,\"codes\":", ty ? "," : "",
               all.sent, all.replies, no_reply[ty], no_reply_dropped[ty], reconnects[ty], send_skipped[ty],
               timed_out[ty], late[ty], window_skipped[ty]);
        print_codes(&all);
        printf(",");
        print_lat(any ? sum : NULL);
        printf(",\"intervals\":[");
        for (int iv = 0; iv < nintervals; iv++) {
            cell_t *c = cell(ty, iv);
            printf("%s{\"sent\":%ld,\"replies\":%ld,\"timed_out\":%ld,\"skipped\":%ld,\"codes\":", iv ? "," : "",
                   c->sent, c->replies, c->timed_out, c->skipped);
            print_codes(c);
            printf(",");
            print_lat(c->hist);
            printf("}");
        }
        printf("]}");
    }
    printf("]}\n");
}

int main(int argc, char **argv) {
    if (argc < 11) {
        fprintf(stderr, "usage: fleetload HOST PORT[,PORT...] FRAMES SCHEDULE T0 INTERVAL NINTERVALS NTYPES DRAIN "
                        "TIMEOUTS\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a connection the server closed: write() says EPIPE, the connection is dropped */
    signal(SIGUSR1, on_usr1);
    for (char *port = argv[2]; port && *port;) {
        addrs = realloc(addrs, (naddrs + 1) * sizeof *addrs);
        struct sockaddr_in *a = &addrs[naddrs++];
        memset(a, 0, sizeof *a);
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)strtol(port, &port, 10));
        inet_pton(AF_INET, argv[1], &a->sin_addr);
        if (*port == ',') port++;
    }
    load_frames(argv[3]);
    size_t size;
    recs = (struct rec *)slurp(argv[4], &size);
    nrecs = size / sizeof(struct rec);
    t0 = atof(argv[5]);
    interval_s = atof(argv[6]);
    nintervals = atoi(argv[7]);
    ntypes = atoi(argv[8]);
    double drain = atof(argv[9]);
    if (ntypes < 1 || ntypes > MAXTYPES || nintervals < 1 || interval_s <= 0) {
        fprintf(stderr, "fleetload: bad NTYPES, NINTERVALS or INTERVAL\n");
        return 2;
    }
    char *list = argv[10];
    for (int ty = 0; ty < ntypes && list && *list; ty++) {
        timeout_s[ty] = strtod(list, &list);
        if (*list == ',') list++;
        if (timeout_s[ty] > 0) tfifo[ty] = malloc(RING * sizeof(uint32_t));
    }
    cells = calloc((size_t)ntypes * nintervals, sizeof(cell_t));
    ring = calloc(RING, sizeof(pending_t));
    next_at = malloc((nrecs ? nrecs : 1) * sizeof(double));
    heap = malloc((nrecs ? nrecs : 1) * sizeof(uint32_t));
    for (size_t i = 0; i < nrecs; i++) {
        if (recs[i].frame >= nframes && (recs[i].op == OP_SEND || recs[i].op == OP_ONEWAY)) {
            fprintf(stderr, "fleetload: record %zu names frame %u of %zu\n", i, recs[i].frame, nframes);
            return 2;
        }
        if (recs[i].conn + 1 > nconns) nconns = recs[i].conn + 1;
        next_at[i] = recs[i].start;
        heap_push((uint32_t)i);
    }
    conns = calloc(nconns ? nconns : 1, sizeof(conn_t));
    ep = epoll_create1(0);
    struct epoll_event evs[1024];
    double started = now(), last_send = -1;
    for (;;) {
        double t = now();
        expire_requests(t);
        if (ending) heap_n = 0; /* the sends still scheduled are not made; what is in flight drains */
        while (heap_n && t0 + next_at[heap[0]] <= t) {
            uint32_t r = heap_pop();
            fire(r, t);
            struct rec *e = &recs[r];
            if (e->period > 0 && e->op != OP_CLOSE) {
                next_at[r] += e->period;
                if (next_at[r] < e->end) heap_push(r);
            }
        }
        if (!heap_n) {
            if (last_send < 0) last_send = t;
            int waiting = 0;
            for (size_t i = 0; i < nconns && !waiting; i++) waiting = conns[i].inflight > 0 || conns[i].qlen > 0;
            if (!waiting || t - last_send > drain) break;
        }
        int timeout = 50;
        if (heap_n) {
            double wait = t0 + next_at[heap[0]] - t;
            timeout = wait <= 0 ? 0 : wait > 0.05 ? 50 : (int)(wait * 1000) + 1;
        }
        int n = epoll_wait(ep, evs, 1024, timeout);
        t = now();
        for (int i = 0; i < n; i++) {
            uint32_t id = evs[i].data.u32;
            conn_t *c = &conns[id];
            if (c->state != C_OPEN && c->state != C_CONNECTING) continue;
            if (evs[i].events & (EPOLLOUT | EPOLLERR)) on_writable(id);
            if (c->state == C_OPEN && evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(id, t);
        }
    }
    report(now() - started);
    return 0;
}
