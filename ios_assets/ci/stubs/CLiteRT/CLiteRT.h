// Stand-in for the C module `CLiteRT` under LiteRT's Swift package (the binaryTarget
// CLiteRT.xcframework of google-ai-edge/LiteRT's Package.swift; umbrella litert/swift/Sources/LiteRtC.h),
// so CI can compile the LiteRT stand-in (../LiteRT.swift) and Sources/EdgeM3/LiteRTRunner.swift on
// Linux (tests/test_swift_litert_runner.py). Not part of the package; never shipped.
//
// Only the C types the stand-in's public Swift signatures name, written from reading
// google-ai-edge/LiteRT at v2.2.0 and main (f67457790c, 2026-08-21; the same values in both):
// - litert/c/litert_common.h: `LiteRtStatus`, every status code with its value (LINT.IfChange
//   status_codes: 31 values, kLiteRtStatusOk and 30 errors). tests/test_swift_litert_runner.py reads
//   this enum as the list of statuses to raise.
// - litert/c/litert_model_types.h: `LiteRtElementType` (what ElementType(cType:) takes).
// - litert/c/litert_tensor_buffer_types.h: `LiteRtTensorBufferType` (TensorBufferType(cType:)).
// - litert/c/litert_common.h: `LiteRtTensorBufferLockMode` (TensorBufferLockMode.cMode).
// - litert/c/litert_custom_tensor_buffer.h: `HwMemoryHandle`.
// Not here: `LiteRtCustomOpKernel` (a struct of kernel callbacks; the stand-in leaves out
// Options.addCustomOpKernel, the one signature that names it).
#ifndef EDGE_M3_STUB_CLITERT_H_
#define EDGE_M3_STUB_CLITERT_H_

typedef enum {
  kLiteRtStatusOk = 0,

  // Generic errors.
  kLiteRtStatusErrorInvalidArgument = 1,
  kLiteRtStatusErrorMemoryAllocationFailure = 2,
  kLiteRtStatusErrorRuntimeFailure = 3,
  kLiteRtStatusErrorMissingInputTensor = 4,
  kLiteRtStatusErrorUnsupported = 5,
  kLiteRtStatusErrorNotFound = 6,
  kLiteRtStatusErrorTimeoutExpired = 7,
  kLiteRtStatusErrorWrongVersion = 8,
  kLiteRtStatusErrorUnknown = 9,
  kLiteRtStatusErrorAlreadyExists = 10,

  // Inference progression errors.
  kLiteRtStatusCancelled = 100,

  // File and loading related errors.
  kLiteRtStatusErrorFileIO = 500,
  kLiteRtStatusErrorInvalidFlatbuffer = 501,
  kLiteRtStatusErrorDynamicLoading = 502,
  kLiteRtStatusErrorSerialization = 503,
  kLiteRtStatusErrorCompilation = 504,

  // IR related errors.
  kLiteRtStatusErrorIndexOOB = 1000,
  kLiteRtStatusErrorInvalidIrType = 1001,
  kLiteRtStatusErrorInvalidGraphInvariant = 1002,
  kLiteRtStatusErrorGraphModification = 1003,

  // Tool related errors.
  kLiteRtStatusErrorInvalidToolConfig = 1500,

  // Legalization related errors.
  kLiteRtStatusLegalizeNoMatch = 2000,
  kLiteRtStatusErrorInvalidLegalization = 2001,

  // Transformation related errors.
  kLiteRtStatusPatternNoMatch = 3000,
  kLiteRtStatusInvalidTransformation = 3001,

  // Version related errors.
  kLiteRtStatusErrorUnsupportedRuntimeVersion = 4000,
  kLiteRtStatusErrorUnsupportedCompilerVersion = 4001,
  kLiteRtStatusErrorIncompatibleByteCodeVersion = 4002,

  // Shape inference related errors.
  kLiteRtStatusErrorUnsupportedOpShapeInferer = 5000,
  kLiteRtStatusErrorShapeInferenceFailed = 5001,
} LiteRtStatus;

typedef enum {
  kLiteRtElementTypeNone = 0,
  kLiteRtElementTypeBool = 6,
  kLiteRtElementTypeInt2 = 20,
  kLiteRtElementTypeInt4 = 18,
  kLiteRtElementTypeInt8 = 9,
  kLiteRtElementTypeInt16 = 7,
  kLiteRtElementTypeInt32 = 2,
  kLiteRtElementTypeInt64 = 4,
  kLiteRtElementTypeUInt4 = 21,
  kLiteRtElementTypeUInt8 = 3,
  kLiteRtElementTypeUInt16 = 17,
  kLiteRtElementTypeUInt32 = 16,
  kLiteRtElementTypeUInt64 = 13,
  kLiteRtElementTypeFloat8E4M3FN = 22,
  kLiteRtElementTypeFloat8E5M2 = 23,
  kLiteRtElementTypeFloat16 = 10,
  kLiteRtElementTypeBFloat16 = 19,
  kLiteRtElementTypeFloat32 = 1,
  kLiteRtElementTypeFloat64 = 11,
  kLiteRtElementTypeComplex64 = 8,
  kLiteRtElementTypeComplex128 = 12,
  kLiteRtElementTypeTfResource = 14,
  kLiteRtElementTypeTfString = 5,
  kLiteRtElementTypeTfVariant = 15,
} LiteRtElementType;

typedef enum {
  kLiteRtTensorBufferTypeUnknown = 0,
  kLiteRtTensorBufferTypeHostMemory = 1,
  kLiteRtTensorBufferTypeAhwb = 2,
  kLiteRtTensorBufferTypeIon = 3,
  kLiteRtTensorBufferTypeDmaBuf = 4,
  kLiteRtTensorBufferTypeFastRpc = 5,
  kLiteRtTensorBufferTypeGlBuffer = 6,
  kLiteRtTensorBufferTypeGlTexture = 7,
  kLiteRtTensorBufferTypeOpenClBuffer = 10,
  kLiteRtTensorBufferTypeOpenClBufferFp16 = 11,
  kLiteRtTensorBufferTypeOpenClTexture = 12,
  kLiteRtTensorBufferTypeOpenClTextureFp16 = 13,
  kLiteRtTensorBufferTypeOpenClBufferPacked = 14,
  kLiteRtTensorBufferTypeOpenClImageBuffer = 15,
  kLiteRtTensorBufferTypeOpenClImageBufferFp16 = 16,
  kLiteRtTensorBufferTypeWebGpuBuffer = 20,
  kLiteRtTensorBufferTypeWebGpuBufferFp16 = 21,
  kLiteRtTensorBufferTypeWebGpuTexture = 22,
  kLiteRtTensorBufferTypeWebGpuTextureFp16 = 23,
  kLiteRtTensorBufferTypeWebGpuImageBuffer = 24,
  kLiteRtTensorBufferTypeWebGpuImageBufferFp16 = 25,
  kLiteRtTensorBufferTypeWebGpuBufferPacked = 26,
  kLiteRtTensorBufferTypeMetalBuffer = 30,
  kLiteRtTensorBufferTypeMetalBufferFp16 = 31,
  kLiteRtTensorBufferTypeMetalTexture = 32,
  kLiteRtTensorBufferTypeMetalTextureFp16 = 33,
  kLiteRtTensorBufferTypeMetalBufferPacked = 34,
  kLiteRtTensorBufferTypeVulkanBuffer = 40,
  kLiteRtTensorBufferTypeVulkanBufferFp16 = 41,
  kLiteRtTensorBufferTypeVulkanTexture = 42,
  kLiteRtTensorBufferTypeVulkanTextureFp16 = 43,
  kLiteRtTensorBufferTypeVulkanImageBuffer = 44,
  kLiteRtTensorBufferTypeVulkanImageBufferFp16 = 45,
  kLiteRtTensorBufferTypeVulkanBufferPacked = 46,
  kLiteRtTensorBufferTypeUserCustomBuffer = 100,
  kLiteRtTensorBufferTypeOpenVINOTensorBuffer = 100,
} LiteRtTensorBufferType;

typedef enum {
  kLiteRtTensorBufferLockModeRead = 0,
  kLiteRtTensorBufferLockModeWrite = 1,
  kLiteRtTensorBufferLockModeReadWrite = 2,
} LiteRtTensorBufferLockMode;

typedef void* HwMemoryHandle;

#endif  // EDGE_M3_STUB_CLITERT_H_
