/* acllab's AscendCL: base types, error codes and data types.
 *
 * Written for acllab from the AscendCL API reference's facts (names, types, values of CANN
 * 8.x; the same values as acllab.errors.CODES and acllab.constants). Every function declared
 * here is implemented by acllab's libascendcl.so, which speaks acllab's device protocol.
 */
#ifndef ACLLAB_ACL_BASE_H
#define ACLLAB_ACL_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ACL_FUNC_VISIBILITY
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

#ifdef __GNUC__
#define ACL_DEPRECATED __attribute__((deprecated))
#define ACL_DEPRECATED_MESSAGE(message) __attribute__((deprecated(message)))
#else
#define ACL_DEPRECATED
#define ACL_DEPRECATED_MESSAGE(message)
#endif

typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtContext;
typedef int aclError;
typedef uint16_t aclFloat16;

static const int ACL_ERROR_NONE = 0;
static const int ACL_SUCCESS = 0;

/* general codes */
static const int ACL_ERROR_INVALID_PARAM = 100000;
static const int ACL_ERROR_UNINITIALIZE = 100001;
static const int ACL_ERROR_REPEAT_INITIALIZE = 100002;
static const int ACL_ERROR_INVALID_FILE = 100003;
static const int ACL_ERROR_WRITE_FILE = 100004;
static const int ACL_ERROR_INVALID_FILE_SIZE = 100005;
static const int ACL_ERROR_PARSE_FILE = 100006;
static const int ACL_ERROR_FILE_MISSING_ATTR = 100007;
static const int ACL_ERROR_FILE_ATTR_INVALID = 100008;
static const int ACL_ERROR_INVALID_DUMP_CONFIG = 100009;
static const int ACL_ERROR_INVALID_PROFILING_CONFIG = 100010;
static const int ACL_ERROR_INVALID_MODEL_ID = 100011;
static const int ACL_ERROR_DESERIALIZE_MODEL = 100012;
static const int ACL_ERROR_PARSE_MODEL = 100013;
static const int ACL_ERROR_READ_MODEL_FAILURE = 100014;
static const int ACL_ERROR_MODEL_SIZE_INVALID = 100015;
static const int ACL_ERROR_MODEL_MISSING_ATTR = 100016;
static const int ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017;
static const int ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018;
static const int ACL_ERROR_MODEL_NOT_DYNAMIC = 100019;
static const int ACL_ERROR_OP_TYPE_NOT_MATCH = 100020;
static const int ACL_ERROR_OP_INPUT_NOT_MATCH = 100021;
static const int ACL_ERROR_OP_OUTPUT_NOT_MATCH = 100022;
static const int ACL_ERROR_OP_ATTR_NOT_MATCH = 100023;
static const int ACL_ERROR_OP_NOT_FOUND = 100024;
static const int ACL_ERROR_OP_LOAD_FAILED = 100025;
static const int ACL_ERROR_UNSUPPORTED_DATA_TYPE = 100026;
static const int ACL_ERROR_FORMAT_NOT_MATCH = 100027;
static const int ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED = 100028;
static const int ACL_ERROR_KERNEL_NOT_FOUND = 100029;
static const int ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED = 100030;
static const int ACL_ERROR_KERNEL_ALREADY_REGISTERED = 100031;
static const int ACL_ERROR_INVALID_QUEUE_ID = 100032;
static const int ACL_ERROR_REPEAT_SUBSCRIBE = 100033;
static const int ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034;
static const int ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035;
static const int ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036;
static const int ACL_ERROR_REPEAT_FINALIZE = 100037;
static const int ACL_ERROR_NOT_STATIC_AIPP = 100038;
static const int ACL_ERROR_BAD_ALLOC = 200000;
static const int ACL_ERROR_API_NOT_SUPPORT = 200001;
static const int ACL_ERROR_INVALID_DEVICE = 200002;
static const int ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200003;
static const int ACL_ERROR_RESOURCE_NOT_MATCH = 200004;
static const int ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005;
static const int ACL_ERROR_FEATURE_UNSUPPORTED = 200006;
static const int ACL_ERROR_PROF_MODULES_UNSUPPORTED = 200007;
static const int ACL_ERROR_STORAGE_OVER_LIMIT = 300000;
static const int ACL_ERROR_INTERNAL_ERROR = 500000;
static const int ACL_ERROR_FAILURE = 500001;
static const int ACL_ERROR_GE_FAILURE = 500002;
static const int ACL_ERROR_RT_FAILURE = 500003;
static const int ACL_ERROR_DRV_FAILURE = 500004;
static const int ACL_ERROR_PROFILING_FAILURE = 500005;

/* runtime codes (the ACL_ERROR_RT_* values the runtime returns through AscendCL) */
static const int ACL_ERROR_RT_PARAM_INVALID = 107000;
static const int ACL_ERROR_RT_INVALID_DEVICEID = 107001;
static const int ACL_ERROR_RT_CONTEXT_NULL = 107002;
static const int ACL_ERROR_RT_STREAM_CONTEXT = 107003;
static const int ACL_ERROR_RT_MODEL_CONTEXT = 107004;
static const int ACL_ERROR_RT_STREAM_MODEL = 107005;
static const int ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006;
static const int ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL = 107007;
static const int ACL_ERROR_RT_ADDR_UNALIGNED = 107008;
static const int ACL_ERROR_RT_FILE_OPEN = 107009;
static const int ACL_ERROR_RT_FILE_WRITE = 107010;
static const int ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011;
static const int ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012;
static const int ACL_ERROR_RT_GROUP_NOT_SET = 107013;
static const int ACL_ERROR_RT_GROUP_NOT_CREATE = 107014;
static const int ACL_ERROR_RT_STREAM_NO_CB_REG = 107015;
static const int ACL_ERROR_RT_INVALID_MEMORY_TYPE = 107016;
static const int ACL_ERROR_RT_INVALID_HANDLE = 107017;
static const int ACL_ERROR_RT_INVALID_MALLOC_TYPE = 107018;
static const int ACL_ERROR_RT_WAIT_TIMEOUT = 107019;
static const int ACL_ERROR_RT_TASK_TIMEOUT = 107020;
static const int ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000;
static const int ACL_ERROR_RT_MEMORY_ALLOCATION = 207001;
static const int ACL_ERROR_RT_MEMORY_FREE = 207002;
static const int ACL_ERROR_RT_NO_EVENT_RESOURCE = 207007;
static const int ACL_ERROR_RT_NO_STREAM_RESOURCE = 207008;
static const int ACL_ERROR_RT_INTERNAL_ERROR = 507000;
static const int ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507004;
static const int ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006;
static const int ACL_ERROR_RT_REPORT_TIMEOUT = 507012;
static const int ACL_ERROR_RT_AICORE_EXCEPTION = 507015;
static const int ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046;
static const int ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047;

/* graph engine codes (model loading and execution) */
static const int ACL_ERROR_GE_PARAM_INVALID = 145000;
static const int ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID = 145002;
static const int ACL_ERROR_GE_EXEC_MODEL_ID_INVALID = 145003;
static const int ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID = 145006;
static const int ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID = 145007;
static const int ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID = 145011;
static const int ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID = 145012;
static const int ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID = 145013;
static const int ACL_ERROR_GE_SHAPE_INVALID = 145021;
static const int ACL_ERROR_GE_MEMORY_ALLOCATION = 245000;
static const int ACL_ERROR_GE_INTERNAL_ERROR = 545000;
static const int ACL_ERROR_GE_LOAD_MODEL = 545001;

typedef enum {
    ACL_DT_UNDEFINED = -1,
    ACL_FLOAT = 0,
    ACL_FLOAT16 = 1,
    ACL_INT8 = 2,
    ACL_INT32 = 3,
    ACL_UINT8 = 4,
    ACL_INT16 = 6,
    ACL_UINT16 = 7,
    ACL_UINT32 = 8,
    ACL_INT64 = 9,
    ACL_UINT64 = 10,
    ACL_DOUBLE = 11,
    ACL_BOOL = 12,
    ACL_STRING = 13,
    ACL_COMPLEX64 = 16,
    ACL_COMPLEX128 = 17,
    ACL_BF16 = 27
} aclDataType;

typedef enum {
    ACL_FORMAT_UNDEFINED = -1,
    ACL_FORMAT_NCHW = 0,
    ACL_FORMAT_NHWC = 1,
    ACL_FORMAT_ND = 2,
    ACL_FORMAT_NC1HWC0 = 3,
    ACL_FORMAT_FRACTAL_Z = 4,
    ACL_FORMAT_FRACTAL_NZ = 29
} aclFormat;

typedef enum {
    ACL_DEBUG = 0,
    ACL_INFO = 1,
    ACL_WARNING = 2,
    ACL_ERROR = 3
} aclLogLevel;

typedef enum {
    ACL_MEMTYPE_DEVICE = 0,
    ACL_MEMTYPE_HOST = 1
} aclMemType;

typedef enum {
    ACL_DEVICE_INFO_UNDEFINED = -1,
    ACL_DEVICE_INFO_AI_CORE_NUM = 0,
    ACL_DEVICE_INFO_VECTOR_CORE_NUM = 1,
    ACL_DEVICE_INFO_L2_SIZE = 2
} aclDeviceInfo;

typedef struct aclDataBuffer aclDataBuffer;

/* data buffers: an address and a size, as a model's inputs and outputs take them */
ACL_FUNC_VISIBILITY aclDataBuffer *aclCreateDataBuffer(void *data, size_t size);
ACL_FUNC_VISIBILITY aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer);
ACL_FUNC_VISIBILITY aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data,
                                                 size_t size);
ACL_FUNC_VISIBILITY void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer);
ACL_DEPRECATED_MESSAGE("aclGetDataBufferSize is deprecated, use aclGetDataBufferSizeV2 instead")
ACL_FUNC_VISIBILITY uint32_t aclGetDataBufferSize(const aclDataBuffer *dataBuffer);
ACL_FUNC_VISIBILITY size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer);
ACL_FUNC_VISIBILITY size_t aclDataTypeSize(aclDataType dataType);

/* IEEE 754 half precision <-> float, on the host (no device call, nothing logged) */
ACL_FUNC_VISIBILITY float aclFloat16ToFloat(aclFloat16 value);
ACL_FUNC_VISIBILITY aclFloat16 aclFloatToFloat16(float value);

/* tensor descriptions: a tensor's data type, shape and format (single operators) */
typedef struct aclTensorDesc aclTensorDesc;

ACL_FUNC_VISIBILITY aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims,
                                                       const int64_t *dims, aclFormat format);
ACL_FUNC_VISIBILITY void aclDestroyTensorDesc(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY aclDataType aclGetTensorDescType(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY aclFormat aclGetTensorDescFormat(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY size_t aclGetTensorDescSize(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY size_t aclGetTensorDescElementCount(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY size_t aclGetTensorDescNumDims(const aclTensorDesc *desc);
ACL_DEPRECATED_MESSAGE("aclGetTensorDescDim is deprecated, use aclGetTensorDescDimV2 instead")
ACL_FUNC_VISIBILITY int64_t aclGetTensorDescDim(const aclTensorDesc *desc, size_t index);
ACL_FUNC_VISIBILITY aclError aclGetTensorDescDimV2(const aclTensorDesc *desc, size_t index,
                                                   int64_t *dimSize);
ACL_FUNC_VISIBILITY void aclSetTensorDescName(aclTensorDesc *desc, const char *name);
ACL_FUNC_VISIBILITY const char *aclGetTensorDescName(aclTensorDesc *desc);
ACL_FUNC_VISIBILITY aclError aclSetTensorFormat(aclTensorDesc *desc, aclFormat format);
ACL_FUNC_VISIBILITY aclError aclSetTensorShape(aclTensorDesc *desc, int numDims,
                                               const int64_t *dims);
ACL_FUNC_VISIBILITY aclError aclSetTensorOriginFormat(aclTensorDesc *desc, aclFormat format);
ACL_FUNC_VISIBILITY aclError aclSetTensorOriginShape(aclTensorDesc *desc, int numDims,
                                                     const int64_t *dims);
ACL_FUNC_VISIBILITY aclError aclSetTensorConst(aclTensorDesc *desc, void *dataBuffer,
                                               size_t length);
ACL_FUNC_VISIBILITY aclError aclSetTensorPlaceMent(aclTensorDesc *desc, aclMemType memType);

/* A hardware figure of a device: its AI cores, vector cores or L2 bytes. */
ACL_FUNC_VISIBILITY aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo,
                                                    int64_t *value);

/* An application message for the log (printf's format); ACL_APP_LOG adds where it is from. */
ACL_FUNC_VISIBILITY void aclAppLog(aclLogLevel logLevel, const char *func, const char *file,
                                   uint32_t line, const char *fmt, ...);
#define ACL_APP_LOG(level, fmt, ...) \
    aclAppLog(level, __FUNCTION__, __FILE__, __LINE__, fmt, ##__VA_ARGS__)

/* The explanation of this thread's most recent failed call, or NULL when there is none. */
ACL_FUNC_VISIBILITY const char *aclGetRecentErrMsg(void);

#ifdef __cplusplus
}
#endif

#endif /* ACLLAB_ACL_BASE_H */
