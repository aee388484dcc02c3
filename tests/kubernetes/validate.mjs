// Lints docs/kubernetes/*.yaml against the Kubernetes OpenAPI schemas, as compiled into kubernetes-models.
// Every document of every file must be an object of a known apiVersion+kind that passes its model's validate()
// and names no field its type does not have. Prints one line per valid object; exits 1 naming the file, the
// document index and the error otherwise.
//
// Unknown fields: kubernetes-models' validators do not reject them (its schemas have no
// additionalProperties: false, so a misspelled optional field such as `parallelizm` would pass). The same
// package's TypeScript declarations list each type's fields, so this script walks every object against them,
// as `kubectl --validate=strict` does against the server's schema.
//
//   npm ci --prefix tests/kubernetes && node tests/kubernetes/validate.mjs [DIR]
//   node tests/kubernetes/validate.mjs --expect-invalid tests/kubernetes/invalid   (each file must be refused,
//   with the text of its first line's "# expect: ..." comment in the message)
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim";
import { DaemonSet } from "kubernetes-models/apps/v1/DaemonSet";
import { Job } from "kubernetes-models/batch/v1/Job";

// apiVersion/kind -> [model, its declaration file under kubernetes-models/].
const models = new Map(
  [
    [Namespace, "v1/Namespace"],
    [PersistentVolumeClaim, "v1/PersistentVolumeClaim"],
    [DaemonSet, "apps/v1/DaemonSet"],
    [Job, "batch/v1/Job"],
  ].map(([model, declaration]) => [`${model.apiVersion}/${model.kind}`, [model, declaration]]),
);

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, "node_modules");
const shown = (file) => relative(process.cwd(), file) || file;

// A declaration file's main interface: field name -> type text, and imported type name -> declaration file.
const declarations = new Map();
function declaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  const text = readFileSync(file, "utf8").replace(/\/\*\*[\s\S]*?\*\//g, "");
  const imports = new Map();
  for (const [, names, from] of text.matchAll(/import \{([^}]*)\} from "([^"]+)";/g)) {
    const target = from.startsWith(".")
      ? resolve(dirname(file), from.replace(/\.js$/, ".d.ts"))
      : join(modules, from.endsWith(".js") ? from.replace(/\.js$/, ".d.ts") : `${from}.d.ts`);
    for (const name of names.split(",").map((n) => n.trim()).filter(Boolean)) imports.set(name, target);
  }
  const body = text.match(/export interface \w+(?: extends [\w, ]+)? \{([\s\S]*?)\n\}/);
  const fields = new Map();
  if (body) {
    // "name"?: Type;  or a map over several lines: "name"?: {\n [key: string]: Type;\n };
    for (const [, name, type] of body[1].matchAll(/^\s*"([^"]+)"\??: (\{\n[\s\S]*?\n\s*\}|.+);$/gm)) {
      fields.set(name, type.trim());
    }
  }
  const parsed = { fields: body ? fields : null, imports };
  declarations.set(file, parsed);
  return parsed;
}

// Every field of `value` that its declared type lacks, as "/path/field" (recursing through objects and arrays).
function unknownFields(value, file, path, out) {
  const { fields, imports } = declaration(file);
  if (fields === null || value === null || typeof value !== "object" || Array.isArray(value)) return out;
  for (const [key, child] of Object.entries(value)) {
    const type = fields.get(key);
    if (type === undefined) {
      out.push(`${path}/${key}: unknown field`);
      continue;
    }
    const element = type.match(/^Array<(\w+)>$/);
    const target = imports.get(element ? element[1] : type);
    if (!target || !existsSync(target)) continue;  // a primitive, a map or an alias such as IntOrString
    if (element && Array.isArray(child)) child.forEach((item, i) => unknownFields(item, target, `${path}/${key}/${i}`, out));
    else if (!element) unknownFields(child, target, `${path}/${key}`, out);
  }
  return out;
}

// The errors of one document, or [] when it is valid.
function check(document) {
  if (document.errors.length > 0) return document.errors.map((e) => e.message);
  if (document.warnings.length > 0) return document.warnings.map((w) => w.message);
  const object = document.toJS({ maxAliasCount: 0 });
  if (object === null || typeof object !== "object" || Array.isArray(object)) return ["not an object"];
  const known = models.get(`${object.apiVersion}/${object.kind}`);
  if (!known) return [`unknown apiVersion/kind ${object.apiVersion}/${object.kind}`];
  const [Model, declared] = known;
  const name = `${object.kind} ${object.metadata?.name ?? "(no name)"}`;
  try {
    new Model(object).validate();
  } catch (error) {
    const details = (error.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
    return [`${name}: ${details || error.message}`];
  }
  const unknown = unknownFields(object, join(modules, "kubernetes-models", `${declared}.d.ts`), "", []);
  return unknown.length > 0 ? [`${name}: ${unknown.join("; ")}`] : [];
}

function manifestsIn(dir) {
  return readdirSync(dir)
    .filter((name) => name.endsWith(".yaml") || name.endsWith(".yml"))
    .sort()
    .map((name) => join(dir, name));
}

const args = process.argv.slice(2);
const expectInvalid = args[0] === "--expect-invalid";
const dir = resolve(expectInvalid ? args[1] : args[0] ?? join(here, "..", "..", "docs", "kubernetes"));
const files = manifestsIn(dir);
if (files.length === 0) {
  console.error(`FAIL ${shown(dir)}: no manifests`);
  process.exit(1);
}

let failed = false;
if (expectInvalid) {
  // Each file must be refused, for the reason its first line names.
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    const expected = text.match(/^# expect: (.+)$/m)?.[1];
    const errors = parseAllDocuments(text, { prettyErrors: true }).flatMap(check);
    if (!expected || !errors.some((e) => e.includes(expected))) {
      console.error(`FAIL ${shown(file)}: expected an error with "${expected}", got: ${errors.join("; ") || "none"}`);
      failed = true;
    } else {
      console.log(`refused ${shown(file)}: ${errors.join("; ")}`);
    }
  }
  process.exit(failed ? 1 : 0);
}

let count = 0;
for (const file of files) {
  parseAllDocuments(readFileSync(file, "utf8"), { prettyErrors: true }).forEach((document, index) => {
    const errors = check(document);
    if (errors.length > 0) {
      console.error(`FAIL ${shown(file)} document ${index}: ${errors.join("; ")}`);
      failed = true;
      return;
    }
    const object = document.toJS();
    console.log(`ok ${shown(file)} document ${index}: ${object.apiVersion} ${object.kind} ${object.metadata?.name ?? ""}`);
    count++;
  });
}
if (failed) process.exit(1);
console.log(`${count} objects valid in ${files.length} files`);
