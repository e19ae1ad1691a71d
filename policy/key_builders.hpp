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

// What every scalar key shares. `assign(field, text)` parses text into the field and returns ""
// or, leaving the field as it was, the error; `show(field)` is the value's text (SHOW CONFIG).
template <class Target, class Access, class Assign, class Show>
KeySpec<Target> scalar_key(std::string name, std::string type, ReloadBehaviour reload, Access access, Assign assign,
                           Show show) {
  KeySpec<Target> k;
  k.name = std::move(name);
  k.type = std::move(type);
  k.reload = reload;
  k.set = [access, assign](Target& t, std::string_view text) -> std::string { return assign(access(t), text); };
  k.get = [access, show](const Target& t) -> std::string { return show(access(t)); };
  add_copy(k, access);
  return k;
}

template <class Target, class Access>
KeySpec<Target> int_key(std::string name, Access access, long long lo, long long hi, ReloadBehaviour reload) {
  using V = std::remove_cvref_t<decltype(access(std::declval<Target&>()))>;
  return scalar_key<Target>(
      std::move(name), "an integer " + std::to_string(lo) + ".." + std::to_string(hi), reload, access,
      [lo, hi](V& field, std::string_view text) -> std::string {
        auto v = parse_integer(text);
        if (!v) return "expected an integer, got '" + std::string(text) + "'";
        if (*v < lo || *v > hi)
          return "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::string(text);
        field = static_cast<V>(*v);
        return {};
      },
      [](const V& v) { return std::to_string(v); });
}

template <class Target, class Access>
KeySpec<Target> bool_key(std::string name, Access access, ReloadBehaviour reload) {
  return scalar_key<Target>(
      std::move(name), "a boolean", reload, access,
      [](bool& field, std::string_view text) -> std::string {
        auto v = parse_boolean(text);
        if (!v) return "expected true or false, got '" + std::string(text) + "'";
        field = *v;
        return {};
      },
      [](bool v) { return std::string(v ? "true" : "false"); });
}

// Free text; `check` may reject some values ("" = fine).
template <class Target, class Access, class Check>
KeySpec<Target> string_key(std::string name, Access access, ReloadBehaviour reload, Check check) {
  auto k = scalar_key<Target>(
      std::move(name), "a string", reload, access,
      [check](std::string& field, std::string_view text) -> std::string {
        std::string err = check(text);
        if (err.empty()) field = std::string(text);
        return err;
      },
      [](const std::string& v) { return v; });
  k.nullable = true;
  return k;
}

template <class Target, class Access>
KeySpec<Target> string_key(std::string name, Access access, ReloadBehaviour reload) {
  return string_key<Target>(std::move(name), access, reload, [](std::string_view) { return std::string(); });
}

// One of a fixed set of words, stored as the word itself.
template <class Target, class Access>
KeySpec<Target> word_key(std::string name, Access access, std::vector<std::string> words, ReloadBehaviour reload) {
  std::string type = "one of " + join(words, "|");
  return scalar_key<Target>(
      std::move(name), std::move(type), reload, access,
      [words](std::string& field, std::string_view text) -> std::string {
        std::string err = check_word(text, words);
        if (err.empty()) field = std::string(text);
        return err;
      },
      [](const std::string& v) { return v; });
}

// One of a fixed set of words, stored as an enum whose values follow the words' order.
template <class Target, class Access>
KeySpec<Target> enum_key(std::string name, Access access, std::vector<std::string> words, ReloadBehaviour reload) {
  using E = std::remove_cvref_t<decltype(access(std::declval<Target&>()))>;
  std::string type = "one of " + join(words, "|");
  return scalar_key<Target>(
      std::move(name), std::move(type), reload, access,
      [words](E& field, std::string_view text) -> std::string {
        std::string err = check_word(text, words);
        if (!err.empty()) return err;
        for (std::size_t i = 0; i < words.size(); ++i)
          if (words[i] == text) field = static_cast<E>(i);
        return {};
      },
      [words](const E& v) { return words.at(static_cast<std::size_t>(v)); });
}

template <class Target, class Access>
KeySpec<Target> endpoint_key(std::string name, Access access, ReloadBehaviour reload) {
  using V = std::remove_cvref_t<decltype(access(std::declval<Target&>()))>;
  return scalar_key<Target>(
      std::move(name), "HOST:PORT", reload, access,
      [](V& field, std::string_view text) -> std::string {
        auto ep = parse_endpoint(text);
        if (!ep) return endpoint_error(text);
        field = *ep;
        return {};
      },
      [](const V& v) { return v.to_string(); });
}

template <class Target, class Access>
KeySpec<Target> admin_endpoint_key(std::string name, Access access, ReloadBehaviour reload) {
  using V = std::remove_cvref_t<decltype(access(std::declval<Target&>()))>;
  auto k = scalar_key<Target>(
      std::move(name), "HOST:PORT or PORT", reload, access,
      [](V& field, std::string_view text) -> std::string {
        if (text.empty()) {
          field.reset();
          return {};
        }
        auto ep = parse_admin_endpoint(text);
        if (!ep) return endpoint_error(text) + " or PORT alone for 127.0.0.1:PORT";
        field = *ep;
        return {};
      },
      [](const V& v) { return v ? v->to_string() : std::string(); });
  k.nullable = true;
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
