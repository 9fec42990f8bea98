/* acllab's PNGD calls (acl/ops/acl_dvpp.h): PNG header info, the output size and the decode.
 * Included by ascendcl.c after its JPEG calls, whose call machinery it uses.
 *
 * Each function sends its pyACL twin's call (acl.media.dvpp_png_get_image_info for
 * acldvppPngGetImageInfo, ...) and returns the code it returns; the rules and codes are the
 * device's (acllab.dvpp.png). Written for acllab; no code of Huawei's.
 */

aclError acldvppPngGetImageInfo(const void *data, uint32_t dataSize, uint32_t *width,
                                uint32_t *height, int32_t *components) {
    NEED(width, "acldvppPngGetImageInfo");
    NEED(height, "acldvppPngGetImageInfo");
    NEED(components, "acldvppPngGetImageInfo");
    uint64_t d = host_addr(data, dataSize);
    int code;
    V *v = call(&code, "acl.media.dvpp_png_get_image_info", "uu", d, (uint64_t)dataSize);
    if (!v) return code;
    int r = ret_of(v);
    if (r == 0) {
        *width = (uint32_t)int_at(v, 0);
        *height = (uint32_t)int_at(v, 1);
        *components = (int32_t)int_at(v, 2);
    }
    vfree(v);
    return r;
}

aclError acldvppPngPredictDecSize(const void *data, uint32_t dataSize,
                                  acldvppPixelFormat outputPixelFormat, uint32_t *decSize) {
    NEED(decSize, "acldvppPngPredictDecSize");
    uint64_t d = host_addr(data, dataSize);
    OUT1(uint32_t, decSize, "acl.media.dvpp_png_predict_dec_size", "uui", d,
         (uint64_t)dataSize, (int64_t)outputPixelFormat);
}

aclError acldvppPngDecodeAsync(acldvppChannelDesc *channelDesc, const void *data, uint32_t size,
                               acldvppPicDesc *outputDesc, aclrtStream stream) {
    uint64_t d = host_addr(data, size);
    STATUS("acl.media.dvpp_png_decode_async", "uuuuu", H(channelDesc), d, (uint64_t)size,
           H(outputDesc), H(stream));
}
