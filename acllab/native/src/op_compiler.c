/* acllab's libacl_op_compiler.so: compiling single operators at run time
 * (acl/acl_op_compiler.h). Included by ascendcl.c, whose call machinery it uses: the library
 * is one file, linked under the names libascendcl.so and libacl_op_compiler.so.
 *
 * Each function sends its pyACL twin's call (acl.op.compile for aclopCompile, ...) and
 * returns the code it returns. Written for acllab; no code of Huawei's.
 */

/* ACL_REQUIRES_NON_NEGATIVE(numInputs / numOutputs): refused here, before any call, as the
 * pyACL twin's lists cannot be negative */
#define COUNTS(nin, nout, api) do { if ((nin) < 0 || (nout) < 0) { \
    fail_here(api, ACL_ERROR_INVALID_PARAM, "numInputs and numOutputs must not be negative"); \
    return ACL_ERROR_INVALID_PARAM; } } while (0)

aclError aclopCompile(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                      int numOutputs, const aclTensorDesc *const outputDesc[],
                      const aclopAttr *attr, aclopEngineType engineType,
                      aclopCompileType compileFlag, const char *opPath) {
    COUNTS(numInputs, numOutputs, "aclopCompile");
    STATUS("acl.op.compile", "sHHuiis", opType, numInputs, (const void *)inputDesc, numOutputs,
           (const void *)outputDesc, H(attr), (int64_t)engineType, (int64_t)compileFlag,
           opPath);
}

aclError aclopCompileAndExecute(const char *opType, int numInputs,
                                const aclTensorDesc *const inputDesc[],
                                const aclDataBuffer *const inputs[], int numOutputs,
                                const aclTensorDesc *const outputDesc[],
                                aclDataBuffer *const outputs[], const aclopAttr *attr,
                                aclopEngineType engineType, aclopCompileType compileFlag,
                                const char *opPath, aclrtStream stream) {
    COUNTS(numInputs, numOutputs, "aclopCompileAndExecute");
    STATUS("acl.op.compile_and_execute", "sHHHHuiisu", opType, numInputs,
           (const void *)inputDesc, numInputs, (const void *)inputs, numOutputs,
           (const void *)outputDesc, numOutputs, (const void *)outputs, H(attr),
           (int64_t)engineType, (int64_t)compileFlag, opPath, H(stream));
}

aclError aclopCompileAndExecuteV2(const char *opType, int numInputs, aclTensorDesc *inputDesc[],
                                  aclDataBuffer *inputs[], int numOutputs,
                                  aclTensorDesc *outputDesc[], aclDataBuffer *outputs[],
                                  aclopAttr *attr, aclopEngineType engineType,
                                  aclopCompileType compileFlag, const char *opPath,
                                  aclrtStream stream) {
    COUNTS(numInputs, numOutputs, "aclopCompileAndExecuteV2");
    STATUS("acl.op.compile_and_execute_v2", "sHHHHuiisu", opType, numInputs,
           (const void *)inputDesc, numInputs, (const void *)inputs, numOutputs,
           (const void *)outputDesc, numOutputs, (const void *)outputs, H(attr),
           (int64_t)engineType, (int64_t)compileFlag, opPath, H(stream));
}

aclError aclSetCompileopt(aclCompileOpt opt, const char *value) {
    STATUS("acl.set_compile_opt", "is", (int64_t)opt, value);
}

size_t aclGetCompileoptSize(aclCompileOpt opt) {
    int64_t n = bare("acl.get_compile_opt_size", "i", (uint64_t)(int64_t)opt, 0);
    return n > 0 ? (size_t)n : 0;
}

aclError aclopSetCompileFlag(aclOpCompileFlag flag) {
    STATUS("acl.op.set_compile_flag", "i", (int64_t)flag);
}

#undef COUNTS
