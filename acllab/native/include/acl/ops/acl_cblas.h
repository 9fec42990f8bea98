/* acllab's AscendCL: the BLAS header's types (aclTransType, aclComputeType).
 *
 * Written for acllab from the AscendCL API reference's facts (CANN 8.0.0, "aclTransType" and
 * "aclComputeType"). acllab has no BLAS calls yet (aclblasGemmEx and the rest are not
 * declared here); the header is there because Ascend's samples include it, the batchcrop
 * sample among them, without calling anything from it.
 */
#ifndef ACLLAB_ACL_CBLAS_H
#define ACLLAB_ACL_CBLAS_H

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aclTransType {
    ACL_TRANS_N = 0,
    ACL_TRANS_T = 1,
    ACL_TRANS_NZ = 2,
    ACL_TRANS_NZ_T = 3
} aclTransType;

typedef enum aclComputeType {
    ACL_COMPUTE_HIGH_PRECISION = 0,
    ACL_COMPUTE_LOW_PRECISION = 1
} aclComputeType;

#ifdef __cplusplus
}
#endif

#endif /* ACLLAB_ACL_CBLAS_H */
