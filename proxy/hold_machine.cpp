#include "proxy/hold_machine.hpp"

namespace predrop::proxy {

const char* to_string(HoldEnding e) {
  switch (e) {
    case HoldEnding::released: return "released";
    case HoldEnding::failed_open: return "failed_open";
    case HoldEnding::refused: return "refused";
    case HoldEnding::cancelled: return "cancelled";
    case HoldEnding::client_left: return "client_left";
  }
  return "?";
}

uint64_t HoldMachine::begin(bool fail_closed) {
  active_ = true;
  fail_closed_ = fail_closed;
  return ++id_;
}

std::optional<HoldEnding> HoldMachine::on(Event event, uint64_t id) {
  if (!active_) return std::nullopt;
  bool mine = event == Event::cancel || event == Event::client_gone || id == id_;
  if (!mine) return std::nullopt;
  active_ = false;
  switch (event) {
    case Event::nothing_to_wait:
    case Event::capture_ok: return HoldEnding::released;
    case Event::capture_failed:
    case Event::timeout: return fail_closed_ ? HoldEnding::refused : HoldEnding::failed_open;
    case Event::cancel: return HoldEnding::cancelled;
    case Event::client_gone: return HoldEnding::client_left;
  }
  return std::nullopt;
}

}  // namespace predrop::proxy
