/* test_expert_names.c: the Mixture-of-Experts name rules of src/trace (fp8_expert_of,
 * fp8_router_of; docs/semantics.md, "Mixture-of-Experts"), case by case against the rule
 * written out by hand. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "testutil.h"
#include "trace.h"

START_TEST(expert_names) {
  int32_t e = -1;
  char g[128];
  ck_assert_int_eq(fp8_expert_of("model.layers.0.mlp.experts.3.gate_up_proj.input", &e, g, sizeof g), 1);
  ck_assert_int_eq(e, 3);
  ck_assert_str_eq(g, "model.layers.0.mlp.experts.*.gate_up_proj.input");
  /* TE GroupedLinear / import-te: the index last */
  ck_assert_int_eq(fp8_expert_of("layers.1.mlp.linear_fc1.experts.17", &e, g, sizeof g), 1);
  ck_assert_int_eq(e, 17);
  ck_assert_str_eq(g, "layers.1.mlp.linear_fc1.experts.*");
  /* the last pair counts (Megatron: experts.local_experts is no number) */
  ck_assert_int_eq(fp8_expert_of("a.experts.1.b.experts.250.c", &e, g, sizeof g), 1);
  ck_assert_int_eq(e, 250);
  ck_assert_str_eq(g, "a.experts.1.b.experts.*.c");
  /* not experts: no number after, a number elsewhere, "experts" inside a component */
  ck_assert_int_eq(fp8_expert_of("model.layers.0.mlp.shared_experts.up_proj.input", &e, g, sizeof g), 0);
  ck_assert_int_eq(fp8_expert_of("model.layers.0.mlp.experts.gate_up_proj", NULL, NULL, 0), 0);
  ck_assert_int_eq(fp8_expert_of("model.myexperts.3.w", NULL, NULL, 0), 0);
  ck_assert_int_eq(fp8_expert_of("experts.3x.w", NULL, NULL, 0), 0);
  ck_assert_int_eq(fp8_expert_of("experts.0", &e, NULL, 0), 1);
  ck_assert_int_eq(e, 0);
  ck_assert_int_eq(fp8_expert_of("x.experts.1234567890.w", NULL, NULL, 0), 0); /* > 9 digits */
  /* a small buffer: cut, still terminated */
  char small[8];
  ck_assert_int_eq(fp8_expert_of("model.layers.0.mlp.experts.3.w", &e, small, sizeof small), 1);
  ck_assert_str_eq(small, "model.l");
}
END_TEST

START_TEST(router_names) {
  const char *names[] = {"model.layers.0.mlp.experts.3.down_proj.input", "model.layers.1.mlp.gate.input",
                         "model.layers.2.feed_forward.experts.0", "x.experts.y.input"};
  ck_assert_int_eq(fp8_router_of("model.layers.0.mlp.gate", names, 4), 1);
  ck_assert_int_eq(fp8_router_of("model.layers.0.mlp.router", names, 4), 1);
  ck_assert_int_eq(fp8_router_of("model.layers.2.feed_forward.router", names, 4), 1);
  /* no experts beside it: a dense model's gate is no router */
  ck_assert_int_eq(fp8_router_of("model.layers.1.mlp.gate", names, 4), 0);
  ck_assert_int_eq(fp8_router_of("model.layers.0.mlp.gate_proj", names, 4), 0);
  ck_assert_int_eq(fp8_router_of("x.gate", names, 4), 0); /* x.experts.y: no index */
  ck_assert_int_eq(fp8_router_of("gate", names, 4), 0);
  const char *top[] = {"experts.2.w.input"};
  ck_assert_int_eq(fp8_router_of("router", top, 1), 1);
}
END_TEST

TU_MAIN("expert_names", "names", NULL, NULL, 0, expert_names, router_names)
