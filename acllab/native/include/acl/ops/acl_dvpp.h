/* acllab's AscendCL: DVPP, the media engines (acldvpp*).
 *
 * Written for acllab from the AscendCL API reference's facts (names and types of CANN 8.x).
 * So far the DVPP memory functions only, each as its pyACL twin (acl.media.dvpp_malloc,
 * acl.media.dvpp_free); the picture descriptions, channels and VPC/JPEGD calls are issue
 * 25's later steps.
 */
#ifndef ACLLAB_ACL_DVPP_H
#define ACLLAB_ACL_DVPP_H

#include <stddef.h>
#include <stdint.h>
#include "acl/acl.h"
#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DVPP memory: device memory the media engines may read and write. */
ACL_FUNC_VISIBILITY aclError acldvppMalloc(void **devPtr, size_t size);
ACL_FUNC_VISIBILITY aclError acldvppFree(void *devPtr);

#ifdef __cplusplus
}
#endif

#endif /* ACLLAB_ACL_DVPP_H */
