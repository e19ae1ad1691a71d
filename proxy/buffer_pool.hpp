// Relay buffers are borrowed while a session moves bytes and given back while it idles,
// so an idle client costs no buffer (PgBouncer's iobuf pool, per event-loop thread).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace predrop::proxy {

class Buffer {
 public:
  Buffer() = default;
  Buffer(std::unique_ptr<char[]> data, size_t cap, bool pooled) : data_(std::move(data)), cap_(cap), pooled_(pooled) {}
  char* data() const { return data_.get(); }
  size_t capacity() const { return cap_; }
  bool pooled() const { return pooled_; }
  explicit operator bool() const { return static_cast<bool>(data_); }
  std::unique_ptr<char[]> release() { cap_ = 0; return std::move(data_); }

 private:
  std::unique_ptr<char[]> data_;
  size_t cap_ = 0;
  bool pooled_ = false;
};

// One per event-loop thread; not thread-safe by design.
class BufferPool {
 public:
  BufferPool(size_t buffer_size, size_t keep_free) : size_(buffer_size), keep_free_(keep_free) {}
  size_t buffer_size() const { return size_; }

  Buffer acquire() {
    if (!free_.empty()) {
      auto p = std::move(free_.back());
      free_.pop_back();
      return Buffer(std::move(p), size_, true);
    }
    return Buffer(std::make_unique<char[]>(size_), size_, true);
  }
  // Oversized buffers (a whole large Query being inspected) are never pooled.
  static Buffer acquire_large(size_t n) { return Buffer(std::make_unique<char[]>(n), n, false); }

  void give_back(Buffer& b) {
    if (!b) return;
    bool pooled = b.pooled();
    auto p = b.release();
    if (pooled && free_.size() < keep_free_) free_.push_back(std::move(p));
  }

 private:
  size_t size_;
  size_t keep_free_;
  std::vector<std::unique_ptr<char[]>> free_;
};

}  // namespace predrop::proxy
