/* acllab's AscendCL: models (aclmdl*): loading an .om file, its description, datasets and
 * execution.
 *
 * Written for acllab from the AscendCL API reference's facts (names, types and values of
 * CANN 8.x). Each function does what its pyACL twin (acl.mdl.*) does on acllab's simulated
 * device and returns the same code; the models are acllab's .om files (acllab atc).
 */
#ifndef ACLLAB_ACL_MDL_H
#define ACLLAB_ACL_MDL_H

#include <stddef.h>
#include <stdint.h>
#include "acl_base.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_MAX_DIM_CNT 128
#define ACL_MAX_TENSOR_NAME_LEN 128
#define ACL_MAX_BATCH_NUM 128
#define ACL_MAX_HW_NUM 128
#define ACL_MAX_SHAPE_COUNT 128
#define ACL_INVALID_NODE_INDEX 0xFFFFFFFF
#define ACL_DYNAMIC_TENSOR_NAME "ascend_mbatch_shape_data"

typedef struct aclmdlDataset aclmdlDataset;
typedef struct aclmdlDesc aclmdlDesc;

typedef struct aclmdlIODims {
    char name[ACL_MAX_TENSOR_NAME_LEN];
    size_t dimCount;
    int64_t dims[ACL_MAX_DIM_CNT];
} aclmdlIODims;

typedef struct aclmdlBatch {
    size_t batchCount;
    uint64_t batch[ACL_MAX_BATCH_NUM];
} aclmdlBatch;

typedef struct aclmdlHW {
    size_t hwCount;
    uint64_t hw[ACL_MAX_HW_NUM][2];
} aclmdlHW;

/* descriptions */
ACL_FUNC_VISIBILITY aclmdlDesc *aclmdlCreateDesc(void);
ACL_FUNC_VISIBILITY aclError aclmdlDestroyDesc(aclmdlDesc *modelDesc);
ACL_FUNC_VISIBILITY aclError aclmdlGetDesc(aclmdlDesc *modelDesc, uint32_t modelId);
ACL_FUNC_VISIBILITY size_t aclmdlGetNumInputs(aclmdlDesc *modelDesc);
ACL_FUNC_VISIBILITY size_t aclmdlGetNumOutputs(aclmdlDesc *modelDesc);
ACL_FUNC_VISIBILITY size_t aclmdlGetInputSizeByIndex(aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY size_t aclmdlGetOutputSizeByIndex(aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY aclError aclmdlGetInputDims(const aclmdlDesc *modelDesc, size_t index,
                                                aclmdlIODims *dims);
ACL_FUNC_VISIBILITY aclError aclmdlGetOutputDims(const aclmdlDesc *modelDesc, size_t index,
                                                 aclmdlIODims *dims);
ACL_FUNC_VISIBILITY aclError aclmdlGetCurOutputDims(const aclmdlDesc *modelDesc, size_t index,
                                                    aclmdlIODims *dims);
ACL_FUNC_VISIBILITY const char *aclmdlGetInputNameByIndex(const aclmdlDesc *modelDesc,
                                                          size_t index);
ACL_FUNC_VISIBILITY const char *aclmdlGetOutputNameByIndex(const aclmdlDesc *modelDesc,
                                                           size_t index);
ACL_FUNC_VISIBILITY aclError aclmdlGetInputIndexByName(const aclmdlDesc *modelDesc,
                                                       const char *name, size_t *index);
ACL_FUNC_VISIBILITY aclError aclmdlGetOutputIndexByName(const aclmdlDesc *modelDesc,
                                                        const char *name, size_t *index);
ACL_FUNC_VISIBILITY aclDataType aclmdlGetInputDataType(const aclmdlDesc *modelDesc,
                                                       size_t index);
ACL_FUNC_VISIBILITY aclDataType aclmdlGetOutputDataType(const aclmdlDesc *modelDesc,
                                                        size_t index);
ACL_FUNC_VISIBILITY aclFormat aclmdlGetInputFormat(const aclmdlDesc *modelDesc, size_t index);
ACL_FUNC_VISIBILITY aclFormat aclmdlGetOutputFormat(const aclmdlDesc *modelDesc, size_t index);

/* dynamic batch, image size and dims: the gears atc compiled, and the one to run */
ACL_FUNC_VISIBILITY aclError aclmdlGetDynamicBatch(const aclmdlDesc *modelDesc,
                                                   aclmdlBatch *batch);
ACL_FUNC_VISIBILITY aclError aclmdlGetDynamicHW(const aclmdlDesc *modelDesc, size_t index,
                                                aclmdlHW *hw);
ACL_FUNC_VISIBILITY aclError aclmdlGetInputDynamicGearCount(const aclmdlDesc *modelDesc,
                                                            size_t index, size_t *gearCount);
ACL_FUNC_VISIBILITY aclError aclmdlGetInputDynamicDims(const aclmdlDesc *modelDesc, size_t index,
                                                       aclmdlIODims *dims, size_t gearCount);
ACL_FUNC_VISIBILITY aclError aclmdlSetDynamicBatchSize(uint32_t modelId, aclmdlDataset *dataset,
                                                       size_t index, uint64_t batchSize);
ACL_FUNC_VISIBILITY aclError aclmdlSetDynamicHWSize(uint32_t modelId, aclmdlDataset *dataset,
                                                    size_t index, uint64_t height,
                                                    uint64_t width);
ACL_FUNC_VISIBILITY aclError aclmdlSetInputDynamicDims(uint32_t modelId, aclmdlDataset *dataset,
                                                       size_t index, const aclmdlIODims *dims);

/* datasets: a model's inputs or outputs, one data buffer each */
ACL_FUNC_VISIBILITY aclmdlDataset *aclmdlCreateDataset(void);
ACL_FUNC_VISIBILITY aclError aclmdlDestroyDataset(const aclmdlDataset *dataset);
ACL_FUNC_VISIBILITY aclError aclmdlAddDatasetBuffer(aclmdlDataset *dataset,
                                                    aclDataBuffer *dataBuffer);
ACL_FUNC_VISIBILITY size_t aclmdlGetDatasetNumBuffers(const aclmdlDataset *dataset);
ACL_FUNC_VISIBILITY aclDataBuffer *aclmdlGetDatasetBuffer(const aclmdlDataset *dataset,
                                                          size_t index);

/* loading and running */
ACL_FUNC_VISIBILITY aclError aclmdlLoadFromFile(const char *modelPath, uint32_t *modelId);
ACL_FUNC_VISIBILITY aclError aclmdlLoadFromMem(const void *model, size_t modelSize,
                                               uint32_t *modelId);
ACL_FUNC_VISIBILITY aclError aclmdlLoadFromFileWithMem(const char *modelPath, uint32_t *modelId,
                                                       void *workPtr, size_t workSize,
                                                       void *weightPtr, size_t weightSize);
ACL_FUNC_VISIBILITY aclError aclmdlQuerySize(const char *fileName, size_t *workSize,
                                             size_t *weightSize);
ACL_FUNC_VISIBILITY aclError aclmdlUnload(uint32_t modelId);
ACL_FUNC_VISIBILITY aclError aclmdlExecute(uint32_t modelId, const aclmdlDataset *input,
                                           aclmdlDataset *output);
ACL_FUNC_VISIBILITY aclError aclmdlExecuteAsync(uint32_t modelId, const aclmdlDataset *input,
                                                aclmdlDataset *output, aclrtStream stream);

#ifdef __cplusplus
}
#endif

/* Differs from CANN: the course article's two spellings that are not AscendCL, accepted so
 * that its listing builds as printed, each with a warning that names the real call (CANN's
 * acl_mdl.h declares neither; define ACLLAB_STRICT_HEADERS to leave them out):
 *   aclmdlModel            a loaded model is a uint32_t model id (aclmdlLoadFromFile fills
 *                          it in, every other aclmdl call takes it);
 *   aclmdlExecute with a stream (C++ only): that is aclmdlExecuteAsync; aclmdlExecute takes
 *                          three arguments and is synchronous. The four-argument form here
 *                          queues the run, as aclmdlExecuteAsync does. */
#ifndef ACLLAB_STRICT_HEADERS
typedef uint32_t aclmdlModel __attribute__((deprecated(
    "not AscendCL: a loaded model is a uint32_t model id (aclmdlLoadFromFile(path, &modelId))")));
#ifdef __cplusplus
__attribute__((deprecated(
    "not AscendCL: aclmdlExecute(modelId, input, output) takes no stream and is synchronous; "
    "with a stream, the call is aclmdlExecuteAsync(modelId, input, output, stream)")))
inline aclError aclmdlExecute(uint32_t modelId, const aclmdlDataset *input,
                              aclmdlDataset *output, aclrtStream stream)
{
    return aclmdlExecuteAsync(modelId, input, output, stream);
}
#endif
#endif

#endif /* ACLLAB_ACL_MDL_H */
