// Builders for KeySpec rows, one per value type. An accessor is a generic lambda returning a
// reference to the field, e.g. [](auto& c) -> auto& { return c.limits.max_clients; }, so one
// lambda serves both the setter and the const getter.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "policy/keys.hpp"
#include "policy/value_text.hpp"

namespace predrop::policy::detail {

template <class Target, class Access>
void add_copy(KeySpec<Target>& k, Access access) {
  k.copy = [access](Target& dst, const Target& src) { access(dst) = access(src); };
}

template <class Target, class Access>
KeySpec<Target> int_key(std::string name, Access access, long long lo, long long hi, ReloadBehaviour reload) {
  using V = std::remove_cvref_t<decltype(access(std::declval<Target&>()))>;
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = "an integer " + std::to_string(lo) + ".." + std::to_string(hi);
  k.reload = reload;
  k.set = [access, lo, hi](Target& t, std::string_view text) -> std::string {
    auto v = parse_integer(text);
    if (!v) return "expected an integer, got '" + std::string(text) + "'";
    if (*v < lo || *v > hi)
      return "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
             std::string(text);
    access(t) = static_cast<V>(*v);
    return {};
  };
  k.get = [access](const Target& t) { return std::to_string(access(t)); };
  add_copy(k, access);
  return k;
}

template <class Target, class Access>
KeySpec<Target> bool_key(std::string name, Access access, ReloadBehaviour reload) {
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = "a boolean";
  k.reload = reload;
  k.set = [access](Target& t, std::string_view text) -> std::string {
    auto v = parse_boolean(text);
    if (!v) return "expected true or false, got '" + std::string(text) + "'";
    access(t) = *v;
    return {};
  };
  k.get = [access](const Target& t) { return std::string(access(t) ? "true" : "false"); };
  add_copy(k, access);
  return k;
}

// Free text; `check` may reject some values ("" = fine).
template <class Target, class Access, class Check>
KeySpec<Target> string_key(std::string name, Access access, ReloadBehaviour reload, Check check) {
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = "a string";
  k.reload = reload;
  k.nullable = true;
  k.set = [access, check](Target& t, std::string_view text) -> std::string {
    std::string err = check(text);
    if (err.empty()) access(t) = std::string(text);
    return err;
  };
  k.get = [access](const Target& t) { return access(t); };
  add_copy(k, access);
  return k;
}

template <class Target, class Access>
KeySpec<Target> string_key(std::string name, Access access, ReloadBehaviour reload) {
  return string_key<Target>(std::move(name), access, reload, [](std::string_view) { return std::string(); });
}

// One of a fixed set of words, stored as the word itself.
template <class Target, class Access>
KeySpec<Target> word_key(std::string name, Access access, std::vector<std::string> words, ReloadBehaviour reload) {
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = "one of " + join(words, "|");
  k.reload = reload;
  k.set = [access, words](Target& t, std::string_view text) -> std::string {
    std::string err = check_word(text, words);
    if (err.empty()) access(t) = std::string(text);
    return err;
  };
  k.get = [access](const Target& t) { return access(t); };
  add_copy(k, access);
  return k;
}

// One of a fixed set of words, stored as an enum whose values follow the words' order.
template <class Target, class Access>
KeySpec<Target> enum_key(std::string name, Access access, std::vector<std::string> words, ReloadBehaviour reload) {
  using E = std::remove_cvref_t<decltype(access(std::declval<Target&>()))>;
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = "one of " + join(words, "|");
  k.reload = reload;
  k.set = [access, words](Target& t, std::string_view text) -> std::string {
    std::string err = check_word(text, words);
    if (!err.empty()) return err;
    for (std::size_t i = 0; i < words.size(); ++i)
      if (words[i] == text) access(t) = static_cast<E>(i);
    return {};
  };
  k.get = [access, words](const Target& t) { return words.at(static_cast<std::size_t>(access(t))); };
  add_copy(k, access);
  return k;
}

template <class Target, class Access>
KeySpec<Target> endpoint_key(std::string name, Access access, ReloadBehaviour reload) {
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = "HOST:PORT";
  k.reload = reload;
  k.set = [access](Target& t, std::string_view text) -> std::string {
    auto ep = parse_endpoint(text);
    if (!ep) return endpoint_error(text);
    access(t) = *ep;
    return {};
  };
  k.get = [access](const Target& t) { return access(t).to_string(); };
  add_copy(k, access);
  return k;
}

template <class Target, class Access>
KeySpec<Target> admin_endpoint_key(std::string name, Access access, ReloadBehaviour reload) {
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = "HOST:PORT or PORT";
  k.reload = reload;
  k.nullable = true;
  k.set = [access](Target& t, std::string_view text) -> std::string {
    if (text.empty()) {
      access(t).reset();
      return {};
    }
    auto ep = parse_admin_endpoint(text);
    if (!ep) return endpoint_error(text) + " or PORT alone for 127.0.0.1:PORT";
    access(t) = *ep;
    return {};
  };
  k.get = [access](const Target& t) { return access(t) ? access(t)->to_string() : std::string(); };
  add_copy(k, access);
  return k;
}

template <class Target, class Access, class CheckItem>
KeySpec<Target> list_key(std::string name, Access access, ReloadBehaviour reload, CheckItem check_item) {
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = "a list of strings";
  k.shape = Shape::list;
  k.reload = reload;
  k.check_item = check_item;
  k.set_list = [access](Target& t, const std::vector<std::string>& items) { access(t) = items; };
  k.get_list = [access](const Target& t) { return access(t); };
  add_copy(k, access);
  return k;
}

}  // namespace predrop::policy::detail
