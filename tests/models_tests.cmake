# models/: the LibTorch model zoo, its data and the synthetic model (included by
# tests/CMakeLists.txt when PIPETWIN_WITH_TORCH=ON).
pipetwin_add_test(models_tests
  models_zoo_test.cpp
  models_data_test.cpp
  models_synthetic_test.cpp
  models_dropout_test.cpp
  models_unet_test.cpp
  models_torchscript_test.cpp
  LIBS pipetwin_models pipetwin_profiles pipetwin_core)
