# Executor suites (need LibTorch): correctness against single-process training, failures,
# multi-process Gloo runs; training runs, checkpoints and injected faults.
pipetwin_add_test(exec_tests
  exec_train_test.cpp
  exec_dropout_test.cpp
  exec_host_waits_test.cpp
  exec_memory_test.cpp
  exec_failure_test.cpp
  exec_distributed_test.cpp
  exec_profiler_test.cpp
  exec_train_loop_test.cpp
  exec_checkpoint_test.cpp
  exec_fault_test.cpp
  exec_data_test.cpp
  exec_host_test.cpp
  exec_elastic_test.cpp
  exec_elastic_faults_test.cpp
  exec_autocache_test.cpp
  exec_skip_test.cpp
  exec_device_test.cpp
  exec_waiters_test.cpp
  exec_mixed_precision_test.cpp
  exec_autocast_loss_test.cpp
  exec_transport_test.cpp
  exec_control_plane_test.cpp
  exec_liveness_test.cpp
  exec_stage_replicas_test.cpp
  exec_torchscript_test.cpp
  LIBS pipetwin_exec pipetwin_models pipetwin_sim pipetwin_profiles pipetwin_core)
# The ThreadSanitizer build (scripts/sanitize.sh tsan) needs only the in-process threaded suites:
# a binary of their two files keeps that second LibTorch build short.
if(PIPETWIN_SANITIZE MATCHES "thread")
  pipetwin_add_test(exec_tsan_tests
    exec_train_test.cpp
    exec_failure_test.cpp
    exec_split_backward_test.cpp
    LIBS pipetwin_exec pipetwin_models pipetwin_sim pipetwin_profiles pipetwin_core)
endif()
# The op-level model's micro-benchmark (exec/profile/microbench.hpp), a binary of its own.
pipetwin_add_test(exec_microbench_tests exec_microbench_test.cpp
  LIBS pipetwin_exec pipetwin_models pipetwin_sim pipetwin_profiles pipetwin_core)
# Tensor parallelism (models/tensor_parallel_model.hpp): shards in threads, and TP x PP over Gloo.
pipetwin_add_test(exec_tensor_parallel_tests exec_tensor_parallel_test.cpp
  LIBS pipetwin_exec pipetwin_models pipetwin_sim pipetwin_profiles pipetwin_core)
