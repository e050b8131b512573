/* rmqload: a wrk-like load generator for RocketMQ's remoting protocol (GET_ROUTEINFO_BY_TOPIC, code 105).
 *
 *   rmqload HOST PORT CONNECTIONS DEPTH SECONDS TOPICS [VERSION]
 *
 * Opens CONNECTIONS TCP connections, keeps DEPTH requests in flight on each (pipelined), asks for the route of a
 * random topic T0..T(TOPICS-1) each time, for SECONDS seconds, then prints one JSON line: requests/s, replies by
 * outcome (code 0 / other) and latency percentiles. One thread, epoll: the other core serves.
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

static unsigned char *frames[NFRAMES];
static size_t frame_len[NFRAMES];
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

static int send_one(conn_t *c) {
    int k = rand() % NFRAMES;
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
    build_frames(topics, version);
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
                /* our replies and the ceiling's put "code" first: {"code":0,... */
                if (total > 16 && memcmp(p + 8, "{\"code\":0,", 10) == 0) ok++; else other++;
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
           "\"depth\":%d,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f}\n",
           (ok + other) / elapsed, ok, other, errors, elapsed, nconn, depth, pct(50), pct(90), pct(99));
    return 0;
}
