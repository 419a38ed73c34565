// Stand-in for the TensorFlowLiteC pod's module (the C API under TensorFlowLiteSwift), so CI can
// compile and run Sources/EdgeM3/TFLiteRunner.swift on Linux (tests/test_swift_ios_binding.py).
// Not part of the package; never shipped.
//
// Pinned version: TensorFlowLiteC 2.17.0, what `pod 'TensorFlowLiteSwift', '~> 2.17'` resolves to
// (2.17.0 is the last stable TensorFlowLiteSwift/TensorFlowLiteC on CocoaPods trunk; LiteRT's pods
// publish nightlies only). Declarations written from reading, not copied:
// - tensorflow/tensorflow, tensorflow/lite/core/c/common.h: `TfLiteDelegate` (a complete struct;
//   here its first and its `flags` field only: the kit never reads a field, it passes the pointer).
// - tensorflow/tensorflow, tensorflow/lite/delegates/xnnpack/xnnpack_delegate.h:
//   `TfLiteXNNPackDelegateOptions` with the field order of the file-backed weight cache era
//   (num_threads, runtime_flags, flags, weights_cache, handle_variable_ops,
//   weight_cache_file_path, weight_cache_file_descriptor, weight_cache_provider), read from the
//   stored index copy of that header (the 2.3 GB tensorflow snapshot is over this machine's fetch
//   limit, so the v2.17.0 tag's own text was not read: see ios_assets/README.md "What CI checks");
//   `TfLiteXNNPackDelegateOptionsDefault`, `TfLiteXNNPackDelegateCreate`,
//   `TfLiteXNNPackDelegateDelete` with the header's signatures.
// Behaviour (stub.c): Create copies the options and returns a new delegate, Delete frees it; the
// copy is readable for tests (EdgeM3StubXNNPackLastOptions), which the real library has not.
#ifndef EDGE_M3_STUB_TENSORFLOWLITEC_H_
#define EDGE_M3_STUB_TENSORFLOWLITEC_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

// Stand-in only (no such function in TensorFlowLiteC): the options of the last Create and how
// many delegates are alive, for the tests.
TfLiteXNNPackDelegateOptions EdgeM3StubXNNPackLastOptions(void);
int EdgeM3StubXNNPackLiveDelegates(void);

#endif  // EDGE_M3_STUB_TENSORFLOWLITEC_H_
