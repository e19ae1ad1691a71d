#include "decoder_test_util.hpp"

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace dectest {

std::vector<Chunk> load_session(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Chunk> out;
  size_t i = 0;
  while (i < data.size()) {
    if (data.size() - i < 5 || (data[i] != 'F' && data[i] != 'B')) throw std::runtime_error("corrupt recording " + path);
    uint32_t n = wire::read_u32(data.data() + i + 1);
    if (data.size() - i - 5 < n) throw std::runtime_error("truncated recording " + path);
    out.push_back({data[i] == 'B', data.substr(i + 5, n)});
    i += 5 + n;
  }
  return out;
}

std::string facts_print(const std::shared_ptr<const predrop::parser::Facts>& f) {
  if (!f) return "-";
  return std::to_string(f->statements.size()) + (f->destroys() ? "D" : "") + (f->touches_search_path() ? "S" : "") + ":" +
         f->fingerprint + ":" + f->normalized;
}

void Replayer::feed(bool backend, std::string_view bytes) {
  Pipe& p = backend ? back_ : front_;
  p.buf.append(bytes);
  run(p, backend);
  // Decided bytes are dropped now and then, as the relay recycles its buffer.
  if (p.scan > (1u << 16)) {
    p.buf.erase(0, p.scan);
    p.scan = 0;
  }
}

void Replayer::run(Pipe& p, bool backend) {
  if (lost) return;
  if (!backend && !p.startup_seen) {
    // The startup packet has no type byte; the decoder starts after it (startup.cpp reads it).
    if (p.buf.size() - p.scan < 4) return;
    uint32_t n = wire::read_u32(p.buf.data() + p.scan);
    if (p.buf.size() - p.scan < n) return;
    p.scan += n;
    p.startup_seen = true;
  }
  const char* dir = backend ? "B " : "F ";
  while (true) {
    if (p.pass_remaining > 0) {
      uint64_t n = std::min<uint64_t>(p.pass_remaining, p.buf.size() - p.scan);
      p.scan += n;
      p.pass_remaining -= n;
      if (p.pass_remaining > 0) return;
    }
    size_t avail = p.buf.size() - p.scan;
    const char* m = p.buf.data() + p.scan;
    Frame f = frame_message(backend ? backend_table() : frontend_table(), m, avail, limits_);
    std::string line = dir + std::string(1, f.type) + " " + std::to_string(f.total);
    switch (f.kind) {
      case Frame::Kind::incomplete:
        EXPECT_GT(f.need, avail);
        return;
      case Frame::Kind::bad_length:
        events.push_back(line + " bad_length");
        lost = true;
        return;
      case Frame::Kind::stream: {
        EXPECT_EQ(f.need, wire::kHeaderLen);
        if (backend) d_.on_backend_streamed(f.type, f.total);
        else d_.on_frontend_streamed(f.type, f.total, f.over_inspect_limit);
        line += f.over_inspect_limit ? " stream-uninspected" : " stream";
        uint64_t n = std::min<uint64_t>(f.total, avail);
        p.scan += n;
        p.pass_remaining = f.total - n;
        break;
      }
      case Frame::Kind::judge: {
        // Whole, or (a Bind longer than the inspection limit) its first `need` bytes, the rest streamed.
        EXPECT_EQ(f.need == f.total, !f.prefix);
        EXPECT_LE(f.need, avail);
        std::string_view whole(m, f.need);
        if (backend) {
          BackendEvent ev = d_.on_backend(whole);
          line += " judge k" + std::to_string(static_cast<int>(ev.kind)) + (ev.desync ? " desync" : "") +
                  (ev.ready ? std::string(" ready ") + ev.status + (ev.transaction_ended ? (ev.committed ? " commit" : " rollback") : "") : "") +
                  (ev.refusal_error ? " refusal" : "") + (ev.sasl_offer ? " sasl" : "") + (ev.backend_key ? " key" : "") + " " + ev.error;
        } else {
          FrontendEvent ev = d_.on_frontend(whole, f.total);
          line += " judge k" + std::to_string(static_cast<int>(ev.kind)) + (f.prefix ? " prefix" : "") +
                  (ev.uninspected ? " uninspected" : "") + " " + facts_print(ev.facts) + " " + ev.error;
        }
        p.scan += f.need;
        p.pass_remaining = f.total - f.need;
        break;
      }
    }
    line += " owed=" + std::to_string(d_.owed().size()) + " desync=" + std::to_string(d_.stats().desync) +
            " txn=" + std::string(1, d_.transaction_status());
    events.push_back(std::move(line));
  }
}

}  // namespace dectest
