// Compile-only stand-in for the TensorFlowLiteC pod (the C API under TensorFlowLiteSwift), so CI
// can type-check Sources/EdgeM3/TFLiteRunner.swift on Linux (tests/test_swift_kit.py): only what
// the runner and ../TensorFlowLite.swift use, with the real names and types
// (tensorflow/lite/core/c/common.h, tensorflow/lite/delegates/xnnpack/xnnpack_delegate.h).
// Never linked.
#ifndef EDGE_M3_STUB_TENSORFLOWLITEC_H_
#define EDGE_M3_STUB_TENSORFLOWLITEC_H_

#include <stdbool.h>
#include <stdint.h>

// A complete struct as in common.h (fields abbreviated), so Swift imports the type itself and
// `UnsafeMutablePointer<TfLiteDelegate>` is what the real module gives.
typedef struct TfLiteDelegate {
  void* data_;
  int64_t flags;
} TfLiteDelegate;

struct TfLiteXNNPackDelegateWeightsCache;

typedef struct {
  int32_t num_threads;
  uint32_t runtime_flags;
  uint32_t flags;
  struct TfLiteXNNPackDelegateWeightsCache* weights_cache;
  bool handle_variable_ops;
  const char* weight_cache_file_path;
  int weight_cache_file_descriptor;
  void* weight_cache_provider;
} TfLiteXNNPackDelegateOptions;

TfLiteXNNPackDelegateOptions TfLiteXNNPackDelegateOptionsDefault(void);
TfLiteDelegate* TfLiteXNNPackDelegateCreate(const TfLiteXNNPackDelegateOptions* options);
void TfLiteXNNPackDelegateDelete(TfLiteDelegate* delegate);

#endif  // EDGE_M3_STUB_TENSORFLOWLITEC_H_
