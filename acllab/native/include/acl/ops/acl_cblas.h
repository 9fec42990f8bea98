/* acllab's AscendCL: BLAS on the NPU (acl/ops/acl_cblas.h), types only.
 *
 * Written for acllab from the AscendCL API reference's facts (names and values of CANN
 * 8.x). acllab declares no aclblas* function yet: this header gives programs that include
 * it (Ascend's acl_compile_and_execute_conv2d and batchcrop samples do, and call none) the
 * types it defines. A program that calls aclblasGemmEx or another aclblas* function does not compile
 * against acllab: run the GEMM op with aclopExecuteV2 or aclopCompileAndExecute instead.
 */
#ifndef ACLLAB_ACL_CBLAS_H
#define ACLLAB_ACL_CBLAS_H

#include "../acl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* how a matrix operand is read */
typedef enum aclTransType {
    ACL_TRANS_N,       /* 0: as it is */
    ACL_TRANS_T,       /* 1: transposed */
    ACL_TRANS_NZ,      /* 2: in the fractal NZ layout */
    ACL_TRANS_NZ_T     /* 3: in the fractal NZ layout, transposed */
} aclTransType;

/* the precision a BLAS op computes in */
typedef enum aclComputeType {
    ACL_COMPUTE_HIGH_PRECISION,    /* 0 */
    ACL_COMPUTE_LOW_PRECISION      /* 1 */
} aclComputeType;

#ifdef __cplusplus
}
#endif

#endif /* ACLLAB_ACL_CBLAS_H */
