// SPDX-License-Identifier: Apache-2.0
// vap_eval.mjs - evaluates a ValidatingAdmissionPolicy's CEL on admission
// requests, as the API server does (the rules of
// https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/):
// the request must match the policy's resource rules and every match
// condition; then the variables are evaluated in order (each may use the
// earlier ones as variables.NAME) and every validation must be true. An
// expression that fails to evaluate counts as failurePolicy says (Fail:
// the request is denied).
//
// Usage: NODE_PATH=<tools>/node/node_modules node vap_eval.mjs < IN.json
// IN: {"policy": <the policy object>, "cases": [{"name", "operation",
//      "resource": {"group", "version", "resource"}, "request": {"userInfo"},
//      "object", "oldObject"}]}
// Prints one JSON line per case: {"name", "matched", "allowed", "denied":
// [the message of each validation that failed]}. Exit 0, or 2 on bad input.
import { createRequire } from "module";
import fs from "fs";
import path from "path";

const require = createRequire(path.join(process.env.NODE_PATH || ".", "noop.js"));
const { evaluate } = await import(require.resolve("@marcbachmann/cel-js"));

function matchesRules(spec, c) {
  const rules = (spec.matchConstraints && spec.matchConstraints.resourceRules) || [];
  const r = c.resource;
  return rules.some((rule) => {
    const any = (list, v) => (list || []).includes("*") || (list || []).includes(v);
    const resources = rule.resources || [];
    const res = r.subresource ? `${r.resource}/${r.subresource}` : r.resource;
    const resOk = resources.includes(res) || resources.includes("*") ||
      (r.subresource && resources.includes(`${r.resource}/*`));
    return any(rule.apiGroups, r.group) && any(rule.apiVersions, r.version) &&
      any(rule.operations, c.operation) && resOk;
  });
}

function truthy(v) {
  return v === true;
}

function runCase(policy, c) {
  const spec = policy.spec;
  const ctx = {
    request: { operation: c.operation, ...(c.request || {}) },
    object: c.object === undefined ? null : c.object,
    oldObject: c.oldObject === undefined ? null : c.oldObject,
  };
  if (!matchesRules(spec, c)) return { name: c.name, matched: false, allowed: true, denied: [] };
  for (const m of spec.matchConditions || []) {
    let v;
    try {
      v = evaluate(m.expression, ctx);
    } catch (e) {
      // An error in a match condition: failurePolicy decides.
      if (spec.failurePolicy !== "Ignore")
        return { name: c.name, matched: true, allowed: false, denied: [`matchCondition ${m.name}: ${e.message}`] };
      return { name: c.name, matched: false, allowed: true, denied: [] };
    }
    if (!truthy(v)) return { name: c.name, matched: false, allowed: true, denied: [] };
  }
  const variables = {};
  const errors = {};
  for (const v of spec.variables || []) {
    try {
      variables[v.name] = evaluate(v.expression, { ...ctx, variables });
    } catch (e) {
      errors[v.name] = e.message;
    }
  }
  const denied = [];
  for (const val of spec.validations || []) {
    let ok;
    try {
      ok = truthy(evaluate(val.expression, { ...ctx, variables }));
    } catch (e) {
      const used = Object.keys(errors).filter((n) => val.expression.includes(`variables.${n}`));
      denied.push(`error: ${e.message}${used.length ? " (variables " + used.join(", ") + ")" : ""}`);
      continue;
    }
    if (!ok) denied.push((val.message || val.messageExpression || "").replace(/\s+/g, " ").trim());
  }
  return { name: c.name, matched: true, allowed: denied.length === 0, denied };
}

let input;
try {
  input = JSON.parse(fs.readFileSync(0, "utf8"));
} catch (e) {
  console.error(`vap_eval: bad input: ${e.message}`);
  process.exit(2);
}
for (const c of input.cases) console.log(JSON.stringify(runCase(input.policy, c)));
