/* acllab's AscendCL: compiling single operators at run time (acl/acl_op_compiler.h, linked
 * as -lacl_op_compiler).
 *
 * Written for acllab from the AscendCL API reference's facts (names, types and values of
 * CANN 8.x). Each function does what its pyACL twin does on acllab's simulated device and
 * returns the same code: aclopCompile is acl.op.compile, aclopCompileAndExecute(V2)
 * acl.op.compile_and_execute(_v2), aclSetCompileopt acl.set_compile_opt,
 * aclGetCompileoptSize acl.get_compile_opt_size, aclopSetCompileFlag
 * acl.op.set_compile_flag. A compiled op is registered: a later aclopExecuteV2 or
 * aclopCreateHandle of the same op finds it without aclopSetModelDir.
 */
#ifndef ACLLAB_ACL_OP_COMPILER_H
#define ACLLAB_ACL_OP_COMPILER_H

#include <stddef.h>
#include "acl_base.h"
#include "acl_op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* what the op is compiled from */
typedef enum aclCompileType {
    ACL_COMPILE_SYS,           /* 0: an op registered with the graph engine */
    ACL_COMPILE_UNREGISTERED   /* 1: an op from the .py in opPath */
} aclopCompileType;

/* the options of aclSetCompileopt */
typedef enum {
    ACL_PRECISION_MODE,             /* 0 */
    ACL_AICORE_NUM,                 /* 1 */
    ACL_AUTO_TUNE_MODE,             /* 2: discarded (ACL_ERROR_FEATURE_UNSUPPORTED) */
    ACL_OP_SELECT_IMPL_MODE,        /* 3 */
    ACL_OPTYPELIST_FOR_IMPLMODE,    /* 4 */
    ACL_OP_DEBUG_LEVEL,             /* 5 */
    ACL_DEBUG_DIR,                  /* 6 */
    ACL_OP_COMPILER_CACHE_MODE,     /* 7 */
    ACL_OP_COMPILER_CACHE_DIR,      /* 8 */
    ACL_OP_PERFORMANCE_MODE,        /* 9 */
    ACL_OP_JIT_COMPILE,             /* 10 */
    ACL_OP_DETERMINISTIC,           /* 11 */
    ACL_CUSTOMIZE_DTYPES,           /* 12 */
    ACL_OP_PRECISION_MODE,          /* 13 */
    ACL_ALLOW_HF32,                 /* 14 */
    ACL_PRECISION_MODE_V2,          /* 15 */
    ACL_OP_DEBUG_OPTION             /* 16 */
} aclCompileOpt;

/* exact or fuzzy compiling (aclopSetCompileFlag; deprecated in CANN 8.x) */
typedef enum aclCompileFlag {
    ACL_OP_COMPILE_DEFAULT,    /* 0 */
    ACL_OP_COMPILE_FUZZ        /* 1 */
} aclOpCompileFlag;

ACL_FUNC_VISIBILITY aclError aclopCompile(const char *opType, int numInputs,
                                          const aclTensorDesc *const inputDesc[],
                                          int numOutputs,
                                          const aclTensorDesc *const outputDesc[],
                                          const aclopAttr *attr, aclopEngineType engineType,
                                          aclopCompileType compileFlag, const char *opPath);

ACL_FUNC_VISIBILITY aclError aclopCompileAndExecute(
    const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
    const aclDataBuffer *const inputs[], int numOutputs,
    const aclTensorDesc *const outputDesc[], aclDataBuffer *const outputs[],
    const aclopAttr *attr, aclopEngineType engineType, aclopCompileType compileFlag,
    const char *opPath, aclrtStream stream);

ACL_FUNC_VISIBILITY aclError aclopCompileAndExecuteV2(
    const char *opType, int numInputs, aclTensorDesc *inputDesc[], aclDataBuffer *inputs[],
    int numOutputs, aclTensorDesc *outputDesc[], aclDataBuffer *outputs[], aclopAttr *attr,
    aclopEngineType engineType, aclopCompileType compileFlag, const char *opPath,
    aclrtStream stream);

ACL_FUNC_VISIBILITY aclError aclSetCompileopt(aclCompileOpt opt, const char *value);

ACL_FUNC_VISIBILITY size_t aclGetCompileoptSize(aclCompileOpt opt);

ACL_FUNC_VISIBILITY aclError aclopSetCompileFlag(aclOpCompileFlag flag);

#ifdef __cplusplus
}
#endif

#endif /* ACLLAB_ACL_OP_COMPILER_H */
