// The worker processes' links (worker_links.hpp): framing, and starting a worker on another
// host and reaching the server from it. read_hostfile (process_workers.hpp) too.
#include "worker_links.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "concurdl/asgd/process_workers.hpp"
#include "concurdl/core/errors.hpp"

namespace concurdl::asgd {
namespace links {

bool send_all(int fd, const void* p, std::size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}
bool recv_all(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::recv(fd, b, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

std::string shell_word(const std::string& w) {
  std::string out = "'";
  for (const char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> remote_shell() {
  std::string text = "ssh";
  for (const char* name : {"CONCURDL_RSH", "OMPI_MCA_plm_rsh_agent"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      text = v;
      break;
    }
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string ipv4_of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    throw UsageError(fmt::format("--hostfile: cannot resolve host '{}'", host));
  char text[INET_ADDRSTRLEN] = {};
  const auto* a = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  const bool ok = ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text) != nullptr;
  ::freeaddrinfo(found);
  if (!ok) throw UsageError(fmt::format("--hostfile: host '{}' has no IPv4 address", host));
  return text;
}

std::string address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr)
    throw UsageError(fmt::format("--hostfile: cannot resolve host '{}'", host));
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in mine{};
  socklen_t len = sizeof mine;
  const bool ok = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &len) == 0;
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  char text[INET_ADDRSTRLEN] = {};
  if (!ok || ::inet_ntop(AF_INET, &mine.sin_addr, text, sizeof text) == nullptr)
    throw UsageError(fmt::format("--hostfile: no route from this machine to '{}'", host));
  return text;
}

int listen_tcp(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 64) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("the server's TCP socket: " + why);
  }
  port = ntohs(a.sin_port);
  return fd;
}

int connect_tcp(const std::string& where, const char* who) {
  const auto colon = where.rfind(':');
  if (colon == std::string::npos) throw UsageError("ps-worker: --connect wants ADDR:PORT");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(where.substr(colon + 1))));
  if (::inet_pton(AF_INET, where.substr(0, colon).c_str(), &a.sin_addr) != 1)
    throw UsageError("ps-worker: --connect: '" + where + "' is not an IPv4 ADDR:PORT");
  const auto until = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      no_delay(fd);
      return fd;
    }
    const int why = errno;
    if (fd >= 0) ::close(fd);
    // Refused: nothing listens there any more (every peer listens before it is named to
    // another), so the run it belonged to is over. Anything else may pass: try again.
    if (why == ECONNREFUSED || Clock::now() > until)
      throw std::runtime_error(
          fmt::format("{} cannot be reached at {}: {}", who, where, std::strerror(why)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool ask(int fd, const ShardFrame& request, ShardFrame& reply) {
  return send_all(fd, &request, sizeof request) && recv_all(fd, &reply, sizeof reply) &&
         reply.type == kReply;
}

// Everything is built before fork: between fork and exec a child of a threaded process may only
// call async-signal-safe functions.
pid_t spawn(std::vector<std::string> args, int fd3) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    if (fd3 >= 0) ::dup2(fd3, 3);  // dup2 clears close-on-exec on the copy
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace links

std::vector<std::string> read_hostfile(const std::filesystem::path& hostfile) {
  std::ifstream in(hostfile);
  if (!in) throw UsageError(fmt::format("--hostfile: cannot read '{}'", hostfile.string()));
  std::vector<std::string> hosts;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    if (std::string host; words >> host) hosts.push_back(host);
  }
  if (hosts.empty())
    throw UsageError(fmt::format("--hostfile: '{}' names no host", hostfile.string()));
  return hosts;
}

}  // namespace concurdl::asgd
