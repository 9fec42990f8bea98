/* acllab's AscendCL: single operators (aclop*): attributes, the op models' directory, and
 * running an operator (by type, or through a handle).
 *
 * Written for acllab from the AscendCL API reference's facts (names and types of CANN 8.x).
 * Each function does what its pyACL twin (acl.op.*) does on acllab's simulated device and
 * returns the same code; the op models are acllab's (acllab atc --singleop).
 */
#ifndef ACLLAB_ACL_OP_H
#define ACLLAB_ACL_OP_H

#include <stddef.h>
#include <stdint.h>
#include "acl_base.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aclopHandle aclopHandle;
typedef struct aclopAttr aclopAttr;

/* the engine an op is compiled for (aclopCompile, acl_op_compiler.h) */
typedef enum aclEngineType {
    ACL_ENGINE_SYS,       /* 0: the default engine */
    ACL_ENGINE_AICORE,    /* 1 */
    ACL_ENGINE_VECTOR,    /* 2 */
} aclopEngineType;

/* attributes */
ACL_FUNC_VISIBILITY aclopAttr *aclopCreateAttr(void);
ACL_FUNC_VISIBILITY void aclopDestroyAttr(const aclopAttr *attr);
ACL_FUNC_VISIBILITY aclError aclopSetAttrBool(aclopAttr *attr, const char *attrName,
                                              uint8_t attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrInt(aclopAttr *attr, const char *attrName,
                                             int64_t attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrFloat(aclopAttr *attr, const char *attrName,
                                               float attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrString(aclopAttr *attr, const char *attrName,
                                                const char *attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrDataType(aclopAttr *attr, const char *attrName,
                                                  aclDataType attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListBool(aclopAttr *attr, const char *attrName,
                                                  int numValues, const uint8_t *values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListInt(aclopAttr *attr, const char *attrName,
                                                 int numValues, const int64_t *values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListFloat(aclopAttr *attr, const char *attrName,
                                                   int numValues, const float *values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListString(aclopAttr *attr, const char *attrName,
                                                    int numValues, const char **values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListDataType(aclopAttr *attr, const char *attrName,
                                                      int numValues, const aclDataType values[]);

/* op models and running */
ACL_FUNC_VISIBILITY aclError aclopSetModelDir(const char *modelDir);
ACL_FUNC_VISIBILITY aclError aclopExecuteV2(const char *opType, int numInputs,
                                            aclTensorDesc *inputDesc[], aclDataBuffer *inputs[],
                                            int numOutputs, aclTensorDesc *outputDesc[],
                                            aclDataBuffer *outputs[], aclopAttr *attr,
                                            aclrtStream stream);
ACL_DEPRECATED_MESSAGE("aclopExecute is deprecated, use aclopExecuteV2 instead")
ACL_FUNC_VISIBILITY aclError aclopExecute(const char *opType, int numInputs,
                                          const aclTensorDesc *const inputDesc[],
                                          const aclDataBuffer *const inputs[], int numOutputs,
                                          const aclTensorDesc *const outputDesc[],
                                          aclDataBuffer *const outputs[], const aclopAttr *attr,
                                          aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclopCreateHandle(const char *opType, int numInputs,
                                               const aclTensorDesc *const inputDesc[],
                                               int numOutputs,
                                               const aclTensorDesc *const outputDesc[],
                                               const aclopAttr *opAttr, aclopHandle **handle);
ACL_FUNC_VISIBILITY void aclopDestroyHandle(aclopHandle *handle);
ACL_FUNC_VISIBILITY aclError aclopExecWithHandle(aclopHandle *handle, int numInputs,
                                                 const aclDataBuffer *const inputs[],
                                                 int numOutputs, aclDataBuffer *const outputs[],
                                                 aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclopCast(const aclTensorDesc *srcDesc,
                                       const aclDataBuffer *srcBuffer,
                                       const aclTensorDesc *dstDesc, aclDataBuffer *dstBuffer,
                                       uint8_t truncate, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLLAB_ACL_OP_H */
