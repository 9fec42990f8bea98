/* acllab's AscendCL: models (aclmdl*).
 *
 * Not yet implemented in acllab's C library (issue 25, later steps): the types the other
 * headers refer to are here so that programs including acl/acl.h build; no function is
 * declared until libascendcl.so implements it.
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
#define ACL_DYNAMIC_TENSOR_NAME "ascend_mbatch_shape_data"

#ifdef __cplusplus
}
#endif

#endif /* ACLLAB_ACL_MDL_H */
