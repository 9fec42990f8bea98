/* acllab's AscendCL: the header programs include (acl/acl.h).
 *
 * Written for acllab from the AscendCL API reference's facts (CANN 8.x). It brings in the
 * runtime, model and operator headers, and declares initialisation and the version query.
 */
#ifndef ACLLAB_ACL_H
#define ACLLAB_ACL_H

#include "acl_rt.h"
#include "acl_op.h"
#include "acl_mdl.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
/* The AscendCL interface version of the release acllab follows (acl.get_version()). */
ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion,
                                             int32_t *patchVersion);
/* The simulated chip's name, e.g. "Ascend310" (acl.get_soc_name()). */
ACL_FUNC_VISIBILITY const char *aclrtGetSocName(void);

#ifdef __cplusplus
}
#endif

#endif /* ACLLAB_ACL_H */
