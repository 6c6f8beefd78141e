#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#define LT_LIKELY(x) __builtin_expect(!!(x), 1)
#define LT_CHECK(cond, msg)                                   \
  do {                                                        \
    if (!(cond)) throw std::runtime_error(std::string(msg));  \
  } while (0)

namespace lt {

template <typename T, std::size_t N>
class RingBuffer {
 public:
  bool push(const T& value) {
    if (size_ == N) return false;
    data_[(head_ + size_) % N] = value;
    ++size_;
    return true;
  }

  std::optional<T> pop() {
    if (size_ == 0) return std::nullopt;
    T out = std::move(data_[head_]);
    head_ = (head_ + 1) % N;
    --size_;
    return out;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  T data_[N]{};
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(std::size_t capacity) : capacity_(capacity) {}

  std::optional<Value> get(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  void put(const Key& key, Value value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(value));
    index_[key] = order_.begin();
    if (index_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

 private:
  std::size_t capacity_;
  std::list<std::pair<Key, Value>> order_;
  std::unordered_map<Key, typename std::list<std::pair<Key, Value>>::iterator, Hash> index_;
  std::mutex mu_;
};

template <typename T>
concept Numeric = std::is_arithmetic_v<T>;

template <Numeric T>
T percentile(std::vector<T> values, double q) {
  LT_CHECK(!values.empty(), "percentile of an empty vector");
  auto k = static_cast<std::size_t>(q * (values.size() - 1));
  std::nth_element(values.begin(), values.begin() + k, values.end());
  return values[k];
}

template <typename... Args>
std::string format_fields(const Args&... args) {
  std::string out;
  ((out += std::to_string(args), out += ','), ...);
  if (!out.empty()) out.pop_back();
  return out;
}

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

  void observe(double v) {
    auto it = std::upper_bound(bounds_.begin(), bounds_.end(), v);
    ++counts_[static_cast<std::size_t>(it - bounds_.begin())];
    if (LT_LIKELY(v >= 0)) sum_ += v;
  }

  [[nodiscard]] std::uint64_t total() const {
    std::uint64_t n = 0;
    for (auto c : counts_) n += c;
    return n;
  }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  double sum_ = 0;
};

template <typename F>
auto retry(F&& fn, int attempts) -> decltype(fn()) {
  for (int i = 1;; ++i) {
    try {
      return std::forward<F>(fn)();
    } catch (const std::exception&) {
      if (i >= attempts) throw;
    }
  }
}

}  // namespace lt
