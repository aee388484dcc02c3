// Validates docs/openapi.yaml: against the official OpenAPI 3.1 schema (@seriousme/openapi-schema-validator, which
// also resolves every $ref), each Schema Object against JSON Schema 2020-12 (Ajv, strict), and rules those leave out.
// Usage: node validate.mjs docs/openapi.yaml. Registered in ctest as openapi_validate; scripts/install-deps.sh installs
// the packages (npm: no Debian package validates OpenAPI 3.1 — the openapi-specification and JSON::Validator
// packages of bookworm know 3.0 only).
import { Validator } from "@seriousme/openapi-schema-validator";
import { localRefs, readDocument, schemaValidator } from "./document.mjs";

const file = process.argv[2];
const { text, doc } = readDocument(file);
const problems = [];
const methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

// 1. The OpenAPI 3.1 document schema (the one the OpenAPI Initiative publishes), $refs included.
const result = await new Validator().validate(structuredClone(doc));
if (!result.valid) problems.push(`OpenAPI 3.1 schema: ${JSON.stringify(result.errors, null, 1)}`);

// 2. Schema Objects are JSON Schema 2020-12 (the 3.1 dialect): each must compile, strictly (a misspelt keyword or type
// fails). strictRequired is off: ExecSpec's oneOf [{required: [argv]}, {required: [script]}] names properties
// defined beside it.
const ajv = schemaValidator(doc, { strict: true, strictRequired: false }, problems);
const components = doc.components?.schemas ?? {};
const compile = (where, schema) => {
  try {
    ajv.compile(localRefs(schema));
  } catch (e) {
    problems.push(`${where}: ${e.message}`);
  }
};
const schemasOf = (where, node) => {
  if (node === null || typeof node !== "object") return;
  if (node.schema && typeof node.schema === "object") compile(`${where}.schema`, node.schema);
  for (const [key, child] of Object.entries(node)) {
    if (key !== "schema" && key !== "schemas") schemasOf(`${where}.${key}`, child);
  }
};
schemasOf("paths", doc.paths);
schemasOf("components", { ...doc.components, schemas: undefined });

// 3. What the document schema cannot say: path templates and their parameters agree, operationIds are unique.
const deref = (p) => (p.$ref ? doc.components.parameters[p.$ref.split("/").pop()] : p);
const operationIds = new Map();
for (const [path, item] of Object.entries(doc.paths ?? {})) {
  const templated = new Set([...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]));
  for (const method of methods.filter((m) => item[m])) {
    const op = item[method];
    const declared = [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref);
    const inPath = new Set(declared.filter((p) => p.in === "path").map((p) => p.name));
    const route = `${method.toUpperCase()} ${path}`;
    for (const name of templated) {
      if (!inPath.has(name)) problems.push(`${route}: path parameter {${name}} is not declared`);
    }
    for (const name of inPath) {
      if (!templated.has(name)) problems.push(`${route}: parameter ${name} is not in the path`);
    }
    if (operationIds.has(op.operationId)) problems.push(`operationId ${op.operationId} is used twice`);
    operationIds.set(op.operationId, path);
  }
}

// 4. The layout tests/daemon/openapi_routes_test.cpp reads without a YAML parser: paths at two spaces, methods at four.
const operationsOf = ([path, item]) => methods.filter((m) => item[m]).map((m) => `${m} ${path}`);
const parsed = new Set(Object.entries(doc.paths ?? {}).flatMap(operationsOf));
const read = new Set();
let inPaths = false, current = null;
for (const line of text.split("\n")) {
  if (/^\S/.test(line)) inPaths = line === "paths:";
  const pathLine = inPaths && line.match(/^  (\/\S*):\s*$/);
  if (pathLine) current = pathLine[1];
  const methodLine = inPaths && current && line.match(/^    ([a-z]+):/);
  if (methodLine && methods.includes(methodLine[1])) read.add(`${methodLine[1]} ${current}`);
}
for (const route of parsed) {
  if (!read.has(route)) problems.push(`${route}: not in block style (paths at two spaces, methods at four)`);
}
// ...and each ErrorNNN schema's codes on one `enum: [...]` line below its name.
let errorSchema = null;
const enumLines = new Set();
for (const line of text.split("\n")) {
  const name = line.match(/^    (Error[0-9]{3}):\s*$/);
  if (name) errorSchema = name[1];
  const codes = errorSchema && line.match(/^\s+enum: \[(.*)\]\s*$/);
  if (!codes) continue;
  const listed = components[errorSchema]?.allOf?.[1]?.properties?.error?.properties?.code?.enum ?? [];
  if (codes[1].split(",").map((c) => c.trim()).join() === listed.join()) enumLines.add(errorSchema);
  errorSchema = null;
}
for (const name of Object.keys(components).filter((n) => /^Error[0-9]{3}$/.test(n))) {
  if (!enumLines.has(name)) problems.push(`${name}: its codes are not on one \`enum: [...]\` line below its name`);
}

if (problems.length > 0) {
  console.error(`${file}: ${problems.length} problem(s)\n- ${problems.join("\n- ")}`);
  process.exit(1);
}
const [paths, schemas] = [Object.keys(doc.paths).length, Object.keys(components).length];
console.log(`${file}: valid OpenAPI ${doc.openapi}: ${parsed.size} operations on ${paths} paths, ${schemas} schemas`);
