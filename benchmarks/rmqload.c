/* rmqload: a wrk-like load generator for RocketMQ's remoting protocol (GET_ROUTEINFO_BY_TOPIC, code 105).
 *
 *   rmqload HOST PORT CONNECTIONS DEPTH SECONDS TOPICS [VERSION]
 *
 * Opens CONNECTIONS TCP connections, keeps DEPTH requests in flight on each (pipelined), asks for the route of a
 * random topic T0..T(TOPICS-1) each time, for SECONDS seconds, then prints one JSON line: requests/s, replies by
 * outcome (code 0 / other) and latency percentiles. One thread, epoll: the other core serves.
 * With RMQLOAD_FRAMES=PATH it sends the complete frames stored in PATH (each with its 4-byte length prefix),
 * in turn, instead (benchmarks/peers.py: registrations, heartbeats, mixes); TOPICS is then ignored.
 * Compiled by benchmarks/remoting_bench.py with the system's cc; loopback only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NFRAMES 4096
#define MAXDEPTH 256
#define BUF (1 << 20)

typedef struct {
    int fd;
    unsigned char *in;
    size_t in_len;
    double sent_at[MAXDEPTH]; /* FIFO of send times: cached reads come back in order */
    int head, count;
} conn_t;

static unsigned char *frames_buf[NFRAMES];
static unsigned char **frames = frames_buf;
static size_t frame_len_buf[NFRAMES];
static size_t *frame_len = frame_len_buf;
static size_t nframes = NFRAMES, next_frame; /* file mode: in turn */
static int from_file;
static int first_other = -1;
static double *lat;
static size_t nlat, caplat;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static void build_frames(int topics, int version) {
    for (int i = 0; i < NFRAMES; i++) {
        char header[256];
        int hl = snprintf(header, sizeof header,
                          "{\"code\":105,\"extFields\":{\"topic\":\"T%d\"},\"flag\":0,\"language\":\"JAVA\","
                          "\"opaque\":%d,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":%d}",
                          rand() % topics, i + 1, version);
        frame_len[i] = 8 + hl;
        frames[i] = malloc(frame_len[i]);
        put32(frames[i], 4 + hl);
        put32(frames[i] + 4, hl); /* serialize type 0 (JSON) in the high byte */
        memcpy(frames[i] + 8, header, hl);
    }
}

static int load_frames(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return -1; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *all = malloc(size);
    if (fread(all, 1, size, f) != (size_t)size) { fclose(f); return -1; }
    fclose(f);
    size_t cap = 64, n = 0;
    frames = malloc(cap * sizeof *frames);
    frame_len = malloc(cap * sizeof *frame_len);
    for (long off = 0; off + 4 <= size;) {
        uint32_t total = (uint32_t)all[off] << 24 | all[off + 1] << 16 | all[off + 2] << 8 | all[off + 3];
        if (n == cap) {
            cap *= 2;
            frames = realloc(frames, cap * sizeof *frames);
            frame_len = realloc(frame_len, cap * sizeof *frame_len);
        }
        frames[n] = all + off;
        frame_len[n++] = 4 + total;
        off += 4 + total;
    }
    nframes = n;
    from_file = 1;
    return n ? 0 : -1;
}

/* The reply's code: JSON headers carry "code":N (ours put it first); ROCKETMQ headers start with int16 code. */
static int reply_code(const unsigned char *p, uint32_t total) {
    uint32_t hl = ((uint32_t)p[5] << 16 | p[6] << 8 | p[7]);
    if (hl > total - 4) return -1;
    if (p[4] == 1) return hl >= 2 ? (p[8] << 8 | p[9]) : -1;
    if (hl >= 10 && memcmp(p + 8, "{\"code\":0,", 10) == 0) return 0;
    const unsigned char *h = p + 8;
    for (uint32_t i = 0; i + 7 < hl; i++)
        if (memcmp(h + i, "\"code\":", 7) == 0) return atoi((const char *)h + i + 7);
    return -1;
}

static int send_one(conn_t *c) {
    size_t k = from_file ? next_frame++ % nframes : (size_t)(rand() % NFRAMES);
    size_t off = 0;
    while (off < frame_len[k]) {
        ssize_t n = write(c->fd, frames[k] + off, frame_len[k] - off);
        if (n < 0) {
            if (errno == EAGAIN) continue; /* tiny frames: the socket buffer drains at once */
            return -1;
        }
        off += n;
    }
    c->sent_at[(c->head + c->count) % MAXDEPTH] = now();
    c->count++;
    return 0;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double p) {
    if (!nlat) return 0;
    size_t i = (size_t)(p / 100.0 * (nlat - 1));
    return lat[i] * 1000.0;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: rmqload HOST PORT CONNECTIONS DEPTH SECONDS TOPICS [VERSION]\n");
        return 2;
    }
    const char *host = argv[1];
    int port = atoi(argv[2]), nconn = atoi(argv[3]), depth = atoi(argv[4]);
    double seconds = atof(argv[5]);
    int topics = atoi(argv[6]), version = argc > 7 ? atoi(argv[7]) : 479;
    if (depth > MAXDEPTH) depth = MAXDEPTH;
    srand(12345);
    const char *file = getenv("RMQLOAD_FRAMES");
    if (file && *file) {
        if (load_frames(file) < 0) {
            fprintf(stderr, "rmqload: no frames in %s\n", file);
            return 2;
        }
    } else {
        build_frames(topics, version);
    }
    caplat = 1 << 20;
    lat = malloc(caplat * sizeof(double));

    int ep = epoll_create1(0);
    conn_t *conns = calloc(nconn, sizeof(conn_t));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &addr.sin_addr);
    for (int i = 0; i < nconn; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
            perror("connect");
            return 1;
        }
        fcntl(fd, F_SETFL, O_NONBLOCK);
        conns[i].fd = fd;
        conns[i].in = malloc(BUF);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        for (int d = 0; d < depth; d++) send_one(&conns[i]);
    }

    long ok = 0, other = 0, errors = 0;
    double start = now(), end = start + seconds;
    struct epoll_event events[256];
    while (now() < end) {
        int n = epoll_wait(ep, events, 256, 100);
        for (int e = 0; e < n; e++) {
            conn_t *c = events[e].data.ptr;
            ssize_t r = read(c->fd, c->in + c->in_len, BUF - c->in_len);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                errors++;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                continue;
            }
            c->in_len += r;
            size_t pos = 0;
            while (c->in_len - pos >= 8) {
                unsigned char *p = c->in + pos;
                uint32_t total = (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
                if (c->in_len - pos < 4 + total) break;
                int code = total > 8 ? reply_code(p, total) : -1;
                if (code == 0) ok++; else { other++; if (first_other < 0) first_other = code; }
                if (c->count > 0) {
                    double t = now() - c->sent_at[c->head];
                    c->head = (c->head + 1) % MAXDEPTH;
                    c->count--;
                    if (nlat < caplat) lat[nlat++] = t;
                }
                pos += 4 + total;
                if (send_one(c) < 0) errors++;
            }
            memmove(c->in, c->in + pos, c->in_len - pos);
            c->in_len -= pos;
        }
    }
    double elapsed = now() - start;
    qsort(lat, nlat, sizeof(double), cmp);
    printf("{\"rps\":%.1f,\"ok\":%ld,\"other\":%ld,\"errors\":%ld,\"seconds\":%.3f,\"connections\":%d,"
           "\"depth\":%d,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"first_other_code\":%d}\n",
           (ok + other) / elapsed, ok, other, errors, elapsed, nconn, depth, pct(50), pct(90), pct(99), first_other);
    return 0;
}
