/* rkdeploy's custom operators for the vendor runtime (RKNN runtime 2.x): exact, fused
 * multi-scale deformable attention (cstMSDeformAttn) and GridSample (cstGridSample) on the
 * CPU, for models written by `rkdeploy export --rknn-custom-op` (docs/rknn-custom-op.md).
 *
 * Two ways in:
 *  - the vendor's plugin convention: librkcst_msdeform_attn.so and librkcst_grid_sample.so in
 *    /usr/lib/rknpu/op_plugins, each exporting get_rknn_custom_op() (one operator per library);
 *  - linking a library and registering after rknn_init:
 *        rknn_register_custom_ops(ctx, rkd_rknn_msdeform_attn_op(), 1);
 * Include it after the vendor's rknn_custom_op.h (or rkdeploy's rknn_abi.h). */
#ifndef RKDEPLOY_RKNN_OPS_H
#define RKDEPLOY_RKNN_OPS_H
#ifdef __cplusplus
extern "C" {
#endif

struct _rknn_custom_op;
struct _rknn_custom_op* rkd_rknn_msdeform_attn_op(void); /* in librkcst_msdeform_attn.so */
struct _rknn_custom_op* rkd_rknn_grid_sample_op(void);   /* in librkcst_grid_sample.so */
/* The calling thread's last error of a callback of this library ("" when none). */
const char* rkd_rknn_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* RKDEPLOY_RKNN_OPS_H */
