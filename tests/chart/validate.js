// SPDX-License-Identifier: Apache-2.0
// validate.js - checks every object in rendered manifests against its
// published schema: the Kubernetes OpenAPI schemas (npm kubernetes-models)
// and, for ServiceMonitor and PodMonitor, the prometheus-operator CRD
// schemas (@kubernetes-models/prometheus-operator). An object of a kind
// neither knows is an error, never skipped.
//
// Usage: NODE_PATH=<tools>/node/node_modules node validate.js [--json OUT] FILE...
// Exit 0 when every object is valid; 1 with one line per problem.
// --json OUT also writes the objects as one JSON array (for tests that
// read the rendered DaemonSet without a YAML parser of their own).
"use strict";
const fs = require("fs");
const YAML = require("yaml");

// apiVersion -> the module folder holding its kinds.
function modelModule(apiVersion, kind) {
  if (apiVersion === "monitoring.coreos.com/v1")
    return `@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}`;
  return `kubernetes-models/${apiVersion}/${kind}`;
}

function validateOne(obj, where) {
  if (!obj || typeof obj !== "object" || !obj.apiVersion || !obj.kind)
    return [`${where}: not a Kubernetes object (no apiVersion/kind)`];
  const name = `${where}: ${obj.kind} ${(obj.metadata && obj.metadata.name) || "(no name)"}`;
  if (!/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(obj.apiVersion) || !/^[A-Za-z]+$/.test(obj.kind))
    return [`${name}: odd apiVersion/kind ${obj.apiVersion} ${obj.kind}`];
  let Model;
  try {
    Model = require(modelModule(obj.apiVersion, obj.kind))[obj.kind];
  } catch (e) {
    return [`${name}: no schema for ${obj.apiVersion} ${obj.kind}`];
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    return [`${name}: ${e.message}`];
  }
  return [];
}

function main(argv) {
  let jsonOut = null;
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--json") jsonOut = argv[++i];
    else files.push(argv[i]);
  }
  if (!files.length) {
    console.error("usage: validate.js [--json OUT] FILE...");
    return 2;
  }
  const problems = [], objects = [];
  for (const f of files) {
    const docs = YAML.parseAllDocuments(fs.readFileSync(f, "utf8"));
    docs.forEach((doc, i) => {
      if (doc.errors.length) {
        problems.push(`${f} document ${i}: YAML: ${doc.errors[0].message}`);
        return;
      }
      const obj = doc.toJSON();
      if (obj === null) return; // an empty document between separators
      objects.push(obj);
      problems.push(...validateOne(obj, `${f} document ${i}`));
    });
  }
  if (!objects.length) problems.push("no objects found");
  for (const p of problems) console.log(p);
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(objects));
  if (!problems.length) console.log(`${objects.length} objects valid`);
  return problems.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
