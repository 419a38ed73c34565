// Compile-only stand-in for the TensorFlowLiteC module (the C API the TensorFlowLiteC pod
// exports), limited to what Sources/EdgeM3/TFLiteRunner.swift calls. Declarations as in
// tensorflow/lite/core/c/common.h (TfLiteDelegate, a complete struct there) and
// tensorflow/lite/delegates/xnnpack/xnnpack_delegate.h (TF Lite >= 2.17); never linked.
#include <stdbool.h>
#include <stdint.h>

typedef struct TfLiteDelegate {
  void* data_;
} TfLiteDelegate;

struct TfLiteXNNPackDelegateWeightsCache;

typedef struct {
  int32_t num_threads;
  uint32_t flags;
  struct TfLiteXNNPackDelegateWeightsCache* weights_cache;
  bool handle_variable_ops;
  const char* weight_cache_file_path;
} TfLiteXNNPackDelegateOptions;

TfLiteXNNPackDelegateOptions TfLiteXNNPackDelegateOptionsDefault(void);
TfLiteDelegate* TfLiteXNNPackDelegateCreate(const TfLiteXNNPackDelegateOptions* options);
void TfLiteXNNPackDelegateDelete(TfLiteDelegate* delegate);
