// parallel/comm_thread.h: one thread that runs jobs in the order they were posted.
//
// Open MPI here has no asynchronous progress (ompi_info: "OMPI progress: no"): a non-blocking
// all-reduce advances only inside MPI calls. So, as PyTorch's ProcessGroupMPI does, every MPI
// call of a communicator is made on one communication thread, blocking there, while the main
// thread goes on with backward; MPI_THREAD_SERIALIZED is then all the library must provide.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace tbd {

class CommThread {
 public:
  CommThread();
  ~CommThread();  // runs what was posted, then joins
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `job`; returns at once.
  void post(std::function<void()> job);
  // Waits until every posted job has run; rethrows the first exception one threw.
  void drain();
  // Runs `job` after the posted ones and waits for it (a blocking collective).
  void run(std::function<void()> job);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace tbd
