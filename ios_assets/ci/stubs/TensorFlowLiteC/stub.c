// Stand-in implementations of the three XNNPACK functions TensorFlowLiteC.h declares (tests only).
#include "TensorFlowLiteC.h"

#include <stdlib.h>
#include <string.h>

static TfLiteXNNPackDelegateOptions last_options;
static int live_delegates;

TfLiteXNNPackDelegateOptions TfLiteXNNPackDelegateOptionsDefault(void) {
  TfLiteXNNPackDelegateOptions options;
  memset(&options, 0, sizeof(options));
  return options;
}

TfLiteDelegate* TfLiteXNNPackDelegateCreate(const TfLiteXNNPackDelegateOptions* options) {
  TfLiteDelegate* delegate = calloc(1, sizeof(TfLiteDelegate));
  if (delegate == NULL) return NULL;
  last_options = options ? *options : TfLiteXNNPackDelegateOptionsDefault();
  live_delegates++;
  return delegate;
}

void TfLiteXNNPackDelegateDelete(TfLiteDelegate* delegate) {
  if (delegate == NULL) return;
  live_delegates--;
  free(delegate);
}

TfLiteXNNPackDelegateOptions EdgeM3StubXNNPackLastOptions(void) { return last_options; }

int EdgeM3StubXNNPackLiveDelegates(void) { return live_delegates; }
