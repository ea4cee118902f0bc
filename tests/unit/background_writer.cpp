// tests/unit/background_writer.cpp — the Checkpointer's writer thread
// (models/train/background_writer.h): writes run in the order queued, on a thread of their
// own; a third write waits while two are queued; a failure keeps what its write finished,
// drops the writes after it and stays; the destructor runs every queued write first.
#include "models/train/background_writer.h"

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace bareyolo;
using namespace std::chrono_literals;

namespace {

// A write that appends `name` to what it wrote and to `ran` (read by the test only after the
// writer has been waited for).
models::BackgroundWriter::Write writing(const std::string& name, std::vector<std::string>& ran) {
  return [name, &ran](std::vector<std::string>& written) {
    ran.push_back(name);
    written.push_back(name);
  };
}

// The same, once `gate` has opened.
models::BackgroundWriter::Write writing_after(const std::shared_future<void>& gate,
                                              const std::string& name,
                                              std::vector<std::string>& ran) {
  return [gate, write = writing(name, ran)](std::vector<std::string>& written) {
    gate.wait();
    write(written);
  };
}

}  // namespace

TEST_CASE("background writer: writes run in order on its thread, a third waits for room") {
  models::BackgroundWriter writer(2);
  std::promise<void> gate;
  const std::shared_future<void> opened = gate.get_future().share();
  std::vector<std::string> ran;
  std::thread::id writer_thread;
  writer.queue(
      [&writer_thread](std::vector<std::string>&) { writer_thread = std::this_thread::get_id(); });
  writer.wait();
  writer.queue(writing_after(opened, "first", ran));
  // One waits behind the running one; the next waits until the first is done.
  std::future<void> second =
      std::async(std::launch::async, [&] { writer.queue(writing("second", ran)); });
  CHECK(second.wait_for(10s) == std::future_status::ready);
  std::future<void> third =
      std::async(std::launch::async, [&] { writer.queue(writing("third", ran)); });
  CHECK(third.wait_for(200ms) == std::future_status::timeout);
  CHECK(writer.take_finished().written.empty());
  gate.set_value();
  third.get();
  writer.wait();

  const std::vector<std::string> expected = {"first", "second", "third"};
  CHECK(ran == expected);
  const models::BackgroundWriter::Finished finished = writer.take_finished();
  CHECK(finished.written == expected);
  CHECK_FALSE(finished.failure);
  CHECK(writer.take_finished().written.empty());  // each path is handed back once
  CHECK(writer_thread != std::thread::id());
  CHECK(writer_thread != std::this_thread::get_id());
}

TEST_CASE("background writer: a failed write keeps what it finished and stops the writes") {
  models::BackgroundWriter writer(2);
  std::promise<void> gate;
  const std::shared_future<void> opened = gate.get_future().share();
  std::vector<std::string> ran;
  writer.queue([opened](std::vector<std::string>& written) {
    opened.wait();
    written.push_back("a");
    throw std::runtime_error("cannot save 'b'");
  });
  writer.queue(writing("queued before the failure", ran));
  gate.set_value();
  writer.wait();
  writer.queue(writing("queued after the failure", ran));
  writer.wait();

  CHECK(ran.empty());
  const models::BackgroundWriter::Finished finished = writer.take_finished();
  CHECK(finished.written == std::vector<std::string>{"a"});
  REQUIRE(finished.failure);
  CHECK_THROWS_WITH_AS(std::rethrow_exception(finished.failure), "cannot save 'b'",
                       std::runtime_error);
  CHECK(writer.take_finished().failure == finished.failure);  // it stays
}

TEST_CASE("background writer: its destructor runs every queued write") {
  std::vector<std::string> ran;
  std::promise<void> gate;
  const std::shared_future<void> opened = gate.get_future().share();
  // Opened once the destructor is (most likely) waiting, with both writes still queued.
  std::thread opener([&gate] {
    std::this_thread::sleep_for(100ms);
    gate.set_value();
  });
  {
    models::BackgroundWriter writer(2);
    writer.queue(writing_after(opened, "first", ran));
    writer.queue(writing("second", ran));
  }
  opener.join();
  CHECK(ran == std::vector<std::string>{"first", "second"});
}
