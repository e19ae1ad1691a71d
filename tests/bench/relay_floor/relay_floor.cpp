// The floor of a relay (issue 23): a byte relay with nothing in it, one thread, to measure what each
// kernel interface costs a relayed transaction on this machine, beside PgBouncer and predrop
// (tests/bench/relay_floor/relay_floor.py). No parsing, no pooling, no limits: not a proxy.
//   relay_floor epoll|uring|uring-defer|uring-in-asio LISTEN_PORT UPSTREAM_PORT
// epoll: level-triggered, a recv and a send per message, as PgBouncer works (and predrop's plaintext
// legs, proxy/readiness.hpp). uring: every recv and send goes through one io_uring, one system call a
// loop turn for all of them; uring-defer: the same ring set up SINGLE_ISSUER | DEFER_TASKRUN, so the
// kernel runs the completions' work only when the loop asks for them; uring-in-asio: a ring driven
// from a Boost.Asio loop, the way predrop's relay threads could take it up.
#include <arpa/inet.h>
#include <boost/asio.hpp>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;

constexpr size_t kBuf = 65536;

struct Pair;
struct Side {
  int fd = -1;
  Side* peer = nullptr;
  Pair* pair = nullptr;
  char buf[kBuf];  // bytes read from this side, waiting to go to the peer
  size_t len = 0, off = 0;
  bool want_write = false;  // epoll: the peer's send would block
};
struct Pair {
  Side a, b;
  bool closed = false;
  int in_flight = 0;  // uring: operations the kernel still holds buffers and sockets of
};

int connect_upstream(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    perror("connect");
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int listen_on(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 512) != 0) {
    perror("listen");
    exit(1);
  }
  return fd;
}

Pair* new_pair(int client, int upstream) {
  auto* p = new Pair;
  p->a.fd = client;
  p->b.fd = upstream;
  p->a.peer = &p->b;
  p->b.peer = &p->a;
  p->a.pair = p->b.pair = p;
  int one = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return p;
}

// ---- epoll, level-triggered, as PgBouncer: read what is there, write it on at once.
int run_epoll(int lfd, int up_port) {
  int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  std::vector<epoll_event> evs(256);
  auto watch = [&](Side* s, int op) {
    epoll_event e{};
    e.events = s->want_write ? EPOLLOUT : EPOLLIN;
    e.data.ptr = s;
    epoll_ctl(ep, op, s->fd, &e);
  };
  std::vector<Pair*> dead;  // freed after the batch of events that may still name them
  auto close_pair = [&](Pair* p) {
    if (p->closed) return;
    p->closed = true;
    close(p->a.fd);
    close(p->b.fd);
    dead.push_back(p);
  };
  for (;;) {
    for (Pair* p : dead) delete p;
    dead.clear();
    int n = epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), -1);
    for (int i = 0; i < n; ++i) {
      auto* s = static_cast<Side*>(evs[i].data.ptr);
      if (!s) {
        int c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK);
        if (c < 0) continue;
        int u = connect_upstream(up_port);
        if (u < 0) { close(c); continue; }
        fcntl(u, F_SETFL, O_NONBLOCK);
        Pair* p = new_pair(c, u);
        watch(&p->a, EPOLL_CTL_ADD);
        watch(&p->b, EPOLL_CTL_ADD);
        continue;
      }
      if (s->pair->closed) continue;
      if (s->want_write) {
        // s's peer's bytes wait in peer->buf to be written to s
        Side* from = s->peer;
        ssize_t w = send(s->fd, from->buf + from->off, from->len - from->off, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN) { close_pair(s->pair); continue; }
        if (w > 0) from->off += static_cast<size_t>(w);
        if (from->off == from->len) {
          from->len = from->off = 0;
          s->want_write = false;
          watch(s, EPOLL_CTL_MOD);
          epoll_event e{};
          e.events = EPOLLIN;
          e.data.ptr = from;
          epoll_ctl(ep, EPOLL_CTL_ADD, from->fd, &e);
        }
        continue;
      }
      ssize_t r = recv(s->fd, s->buf, kBuf, 0);
      if (r == 0 || (r < 0 && errno != EAGAIN)) { close_pair(s->pair); continue; }
      if (r < 0) continue;
      s->len = static_cast<size_t>(r);
      s->off = 0;
      ssize_t w = send(s->peer->fd, s->buf, s->len, MSG_NOSIGNAL);
      if (w < 0 && errno != EAGAIN) { close_pair(s->pair); continue; }
      if (w > 0) s->off = static_cast<size_t>(w);
      if (s->off < s->len) {
        // stop reading s until the peer takes the rest
        epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, nullptr);
        s->peer->want_write = true;
        watch(s->peer, EPOLL_CTL_MOD);
      } else {
        s->len = s->off = 0;
      }
    }
  }
}

// ---- io_uring: one recv outstanding per side; a recv's bytes go out as one send, and the side
// reads again once the send has taken them all.
enum Op : uint64_t { kAccept = 1, kRecv = 2, kSend = 3 };
uint64_t tag(Side* s, Op op) { return reinterpret_cast<uint64_t>(s) | op; }

struct UringRelay {
  io_uring ring{};
  int lfd, up_port;
  // The side's next recv linked behind its send, armed together: the kernel starts the recv when
  // the send has taken every byte (MSG_WAITALL), with no turn of the loop in between.
  bool linked = false;

  UringRelay(int listen_fd, int upstream_port, unsigned flags, bool link_recv_after_send = false)
      : lfd(listen_fd), up_port(upstream_port), linked(link_recv_after_send) {
    io_uring_params params{};
    params.flags = flags;
    int rc = io_uring_queue_init_params(4096, &ring, &params);
    if (rc < 0) {
      fprintf(stderr, "io_uring_queue_init_params: %s\n", strerror(-rc));
      exit(1);
    }
    arm_accept();
  }
  io_uring_sqe* sqe() {
    io_uring_sqe* e = io_uring_get_sqe(&ring);
    if (!e) {
      io_uring_submit(&ring);
      e = io_uring_get_sqe(&ring);
    }
    return e;
  }
  void arm_accept() {
    io_uring_sqe* e = sqe();
    io_uring_prep_accept(e, lfd, nullptr, nullptr, 0);
    io_uring_sqe_set_data64(e, kAccept);
  }
  void arm_recv(Side* s) {
    ++s->pair->in_flight;
    io_uring_sqe* e = sqe();
    io_uring_prep_recv(e, s->fd, s->buf, kBuf, 0);
    io_uring_sqe_set_data64(e, tag(s, kRecv));
  }
  void arm_send(Side* s) {  // s's bytes to its peer
    ++s->pair->in_flight;
    if (linked && io_uring_sq_space_left(&ring) < 2) io_uring_submit(&ring);  // the pair in one submission
    io_uring_sqe* e = sqe();
    io_uring_prep_send(e, s->peer->fd, s->buf + s->off, s->len - s->off, MSG_NOSIGNAL | (linked ? MSG_WAITALL : 0));
    io_uring_sqe_set_data64(e, tag(s, kSend));
    if (linked) {
      e->flags |= IOSQE_IO_LINK;
      arm_recv(s);
    }
  }
  static void free_pair(Pair* p) {
    close(p->a.fd);
    close(p->b.fd);
    delete p;
  }
  void close_pair(Pair* p) {
    if (p->closed) return;
    p->closed = true;
    shutdown(p->a.fd, SHUT_RDWR);  // ends the other side's operation; its completion frees the pair
    shutdown(p->b.fd, SHUT_RDWR);
    if (p->in_flight == 0) free_pair(p);
  }
  // Handles every completion there is; the operations they arm wait to be submitted.
  unsigned complete() {
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      handle(cqe->user_data, cqe->res);
    }
    io_uring_cq_advance(&ring, seen);
    return seen;
  }
  void handle(uint64_t d, int res) {
    if (d == kAccept) {
      arm_accept();
      if (res < 0) return;
      int u = connect_upstream(up_port);
      if (u < 0) {
        close(res);
        return;
      }
      Pair* p = new_pair(res, u);
      arm_recv(&p->a);
      arm_recv(&p->b);
      return;
    }
    auto* s = reinterpret_cast<Side*>(d & ~uint64_t{7});
    Op op = static_cast<Op>(d & 7);
    Pair* p = s->pair;
    --p->in_flight;
    if (p->closed) {
      if (p->in_flight == 0) free_pair(p);
      return;
    }
    if (op == kRecv) {
      if (res <= 0) return close_pair(p);
      s->len = static_cast<size_t>(res);
      s->off = 0;
      arm_send(s);
    } else {
      if (res < 0) return close_pair(p);
      s->off += static_cast<size_t>(res);
      if (linked) {
        if (s->off < s->len) close_pair(p);  // MSG_WAITALL ended short: the linked recv is cancelled
      } else if (s->off < s->len) {
        arm_send(s);
      } else {
        arm_recv(s);
      }
    }
  }
};

// The ring is the loop: every turn submits what the last armed and waits, in one call.
int run_uring(int lfd, int up_port, unsigned flags) {
  UringRelay relay(lfd, up_port, flags);
  for (;;) {
    io_uring_submit_and_wait(&relay.ring, 1);
    relay.complete();
  }
}

// The ring inside an asio loop, as predrop's relay threads would have it (their timers, posts from
// the capture thread and TLS legs stay asio's): asio waits on an eventfd the ring signals when it
// posts completions, and each wake-up takes them, handles them and submits what they armed, a side's
// send and its next recv linked. A wake-up costs an epoll_wait, an epoll_ctl (asio re-arms the
// eventfd's watch; predrop's proxy/readiness.hpp does without), the eventfd's read and one or more
// io_uring_enter, however many messages it relays. The ring is not set up DEFER_TASKRUN: deferred
// completions are posted only when the loop enters the ring, and the eventfd did not announce them
// (one client got 34 transactions a second through it).
int run_uring_in_asio(int lfd, int up_port) {
  UringRelay relay(lfd, up_port, 0, /*link_recv_after_send=*/true);
  asio::io_context io(1);
  int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  io_uring_register_eventfd(&relay.ring, efd);
  asio::posix::stream_descriptor signal(io, efd);
  // The eventfd is read empty at every wake-up: asio re-arms its watch with epoll_ctl(MOD), which
  // reports a still-readable eventfd at once, and the loop would spin.
  std::function<void(boost::system::error_code)> on_signal = [&](boost::system::error_code ec) {
    if (ec) return;
    uint64_t signals;
    (void)!read(efd, &signals, sizeof signals);
    // Until no completion comes: a send submitted here may complete at once, and its side's recv
    // (linked) is armed when it does.
    do io_uring_submit_and_get_events(&relay.ring);
    while (relay.complete() > 0);
    signal.async_wait(asio::posix::stream_descriptor::wait_read, on_signal);
  };
  io_uring_submit(&relay.ring);
  signal.async_wait(asio::posix::stream_descriptor::wait_read, on_signal);
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: relay_floor epoll|uring|uring-defer|uring-in-asio LISTEN_PORT UPSTREAM_PORT\n");
    return 2;
  }
  int lfd = listen_on(atoi(argv[2]));
  int up = atoi(argv[3]);
  std::string mode = argv[1];
  if (mode == "epoll") {
    fcntl(lfd, F_SETFL, O_NONBLOCK);
    return run_epoll(lfd, up);
  }
  if (mode == "uring") return run_uring(lfd, up, 0);
  if (mode == "uring-defer")
    return run_uring(lfd, up, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
  if (mode == "uring-in-asio") return run_uring_in_asio(lfd, up);
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
