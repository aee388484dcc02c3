// Lints docs/kubernetes/*.yaml against the Kubernetes OpenAPI schemas, as compiled into kubernetes-models.
// Every document of every file must be an object of a known apiVersion+kind that passes its model's validate().
// Prints one line per valid object; exits 1 naming the file, the document index and the error otherwise.
//
// Unknown fields: kubernetes-models' validators do not reject them (its schemas have no
// additionalProperties: false; a misspelled optional field such as `parallelizm` passes). This script therefore
// catches wrong types, bad formats and missing required fields, not typos in optional fields.
//
//   npm ci --prefix tests/kubernetes && node tests/kubernetes/validate.mjs
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim";
import { DaemonSet } from "kubernetes-models/apps/v1/DaemonSet";
import { Job } from "kubernetes-models/batch/v1/Job";

const models = new Map(
  [Namespace, PersistentVolumeClaim, DaemonSet, Job].map((model) => [`${model.apiVersion}/${model.kind}`, model]),
);

const here = dirname(fileURLToPath(import.meta.url));
const manifests = join(here, "..", "..", "docs", "kubernetes");
const shown = (file) => relative(process.cwd(), file) || file;

function fail(file, index, message) {
  console.error(`FAIL ${shown(file)} document ${index}: ${message}`);
  process.exit(1);
}

const files = readdirSync(manifests)
  .filter((name) => name.endsWith(".yaml") || name.endsWith(".yml"))
  .sort()
  .map((name) => join(manifests, name));
if (files.length === 0) fail(manifests, 0, "no manifests");

let count = 0;
for (const file of files) {
  const documents = parseAllDocuments(readFileSync(file, "utf8"), { prettyErrors: true });
  documents.forEach((document, index) => {
    if (document.errors.length > 0) fail(file, index, document.errors.map((e) => e.message).join("; "));
    if (document.warnings.length > 0) fail(file, index, document.warnings.map((w) => w.message).join("; "));
    const object = document.toJS({ maxAliasCount: 0 });
    if (object === null || typeof object !== "object" || Array.isArray(object)) fail(file, index, "not an object");
    const Model = models.get(`${object.apiVersion}/${object.kind}`);
    if (!Model) fail(file, index, `unknown apiVersion/kind ${object.apiVersion}/${object.kind}`);
    try {
      new Model(object).validate();
    } catch (error) {
      const details = (error.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      fail(file, index, `${object.kind} ${object.metadata?.name ?? "(no name)"}: ${details || error.message}`);
    }
    console.log(`ok ${shown(file)} document ${index}: ${object.apiVersion} ${object.kind} ${object.metadata?.name ?? ""}`);
    count++;
  });
}
console.log(`${count} objects valid in ${files.length} files`);
