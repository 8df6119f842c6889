/* Cost of the system calls of one Mosquitto 2.0 event-loop pass, on this machine.
 *
 * Prints "name ns_per_call" lines, each the median over `rounds` rounds of
 * `calls` back-to-back calls (CLOCK_MONOTONIC around each round):
 *   recv1        recv(2) of 1 byte from a loopback TCP socket that holds data
 *                (the command byte and each remaining-length byte, lib/packet_mosq.c)
 *   recv64       recv(2) of 64 bytes from the same socket (a small payload)
 *   send80       send(2) of 80 bytes on a loopback TCP connection (a delivery,
 *                packet__write); the peer is drained between rounds
 *   epoll_ready  epoll_wait(2) with one ready descriptor, timeout 0 (src/mux_epoll.c)
 *   sigprocmask  one sigprocmask(2) (mux_epoll__handle calls two per pass)
 * Usage: syscall_costs [calls] [rounds]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void pair(int *srv, int *cli) {
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1, big = 8 << 20;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &n)) {
        perror("listen");
        exit(2);
    }
    *cli = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(*cli, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(*cli, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    if (connect(*cli, (struct sockaddr *)&a, sizeof a)) {
        perror("connect");
        exit(2);
    }
    *srv = accept(l, NULL, NULL);
    setsockopt(*srv, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(*srv, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(*srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(*cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(l);
}

static void fill(int fd, size_t bytes) {
    static char buf[65536];
    while (bytes > 0) {
        size_t k = bytes < sizeof buf ? bytes : sizeof buf;
        ssize_t w = send(fd, buf, k, 0);
        if (w <= 0) {
            perror("send");
            exit(2);
        }
        bytes -= (size_t)w;
    }
    usleep(2000); /* let loopback deliver it */
}

static void drain(int fd, size_t bytes) {
    static char buf[65536];
    while (bytes > 0) {
        ssize_t r = recv(fd, buf, bytes < sizeof buf ? bytes : sizeof buf, 0);
        if (r <= 0) {
            perror("recv");
            exit(2);
        }
        bytes -= (size_t)r;
    }
}

int main(int argc, char **argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 20000, rounds = argc > 2 ? atoi(argv[2]) : 15;
    int srv, cli, ep = epoll_create1(0);
    double *t = malloc(sizeof(double) * (size_t)rounds);
    char buf[128];
    const char *names[] = {"recv1", "recv64", "send80", "epoll_ready", "sigprocmask"};
    struct epoll_event ev = {.events = EPOLLIN}, out[8];
    sigset_t set, old;
    if (calls < 1 || rounds < 1 || !t) {
        fprintf(stderr, "usage: syscall_costs [calls >= 1] [rounds >= 1]\n");
        return 2;
    }
    pair(&srv, &cli);
    ev.data.fd = srv;
    epoll_ctl(ep, EPOLL_CTL_ADD, srv, &ev);
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    for (int k = 0; k < 5; k++) {
        for (int r = 0; r < rounds; r++) {
            double t0, t1;
            if (k == 0 || k == 1) fill(cli, (size_t)calls * (k == 0 ? 1 : 64));
            if (k == 3) fill(cli, 1);
            t0 = now_ns();
            for (int i = 0; i < calls; i++) {
                switch (k) {
                case 0: if (recv(srv, buf, 1, 0) != 1) exit(3); break;
                case 1: if (recv(srv, buf, 64, 0) != 64) exit(3); break;
                case 2: if (send(srv, buf, 80, 0) != 80) exit(3); break;
                case 3: if (epoll_wait(ep, out, 8, 0) != 1) exit(3); break;
                default: sigprocmask(SIG_SETMASK, i & 1 ? &old : &set, i & 1 ? NULL : &old); break;
                }
            }
            t1 = now_ns();
            if (k == 2) drain(cli, (size_t)calls * 80);
            if (k == 3) drain(srv, 1);
            t[r] = (t1 - t0) / calls;
        }
        qsort(t, (size_t)rounds, sizeof(double), cmp);
        printf("%s %.1f\n", names[k], t[rounds / 2]);
    }
    return 0;
}
