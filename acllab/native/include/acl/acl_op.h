/* acllab's AscendCL: single operators (aclop*).
 *
 * Not yet implemented in acllab's C library (issue 25, later steps): present so that
 * programs including acl/acl.h build; no function is declared until libascendcl.so
 * implements it.
 */
#ifndef ACLLAB_ACL_OP_H
#define ACLLAB_ACL_OP_H

#include "acl_base.h"
#include "acl_rt.h"

#endif /* ACLLAB_ACL_OP_H */
