// What validate.mjs and conformance.mjs share: reading docs/openapi.yaml, and its Schema Objects made usable by Ajv
// (JSON Schema 2020-12, the OpenAPI 3.1 dialect) with "#/components/schemas/X" refs pointing at the schema "X".
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import { parse } from "yaml";

// The document's text and its parse (duplicate keys are an error).
export function readDocument(path) {
  const text = readFileSync(path, "utf8");
  return { text, doc: parse(text, { uniqueKeys: true, strict: true }) };
}

// A copy of `schema` whose component refs ("#/components/schemas/Error/properties/error") name the component as Ajv
// knows it ("Error#/properties/error").
export function localRefs(schema) {
  const prefix = "#/components/schemas/";
  return JSON.parse(JSON.stringify(schema), (key, value) => {
    if (key !== "$ref" || typeof value !== "string" || !value.startsWith(prefix)) return value;
    const [name, ...rest] = value.slice(prefix.length).split("/");
    return rest.length > 0 ? `${name}#/${rest.join("/")}` : name;
  });
}

// An Ajv holding every component schema under its name; `problems` gets those that do not compile.
export function schemaValidator(doc, options, problems) {
  const ajv = new Ajv2020({ allErrors: true, ...options });
  ajv.addVocabulary(["discriminator", "xml", "externalDocs", "example"]);  // the OpenAPI keywords of a Schema Object
  const schemas = doc.components?.schemas ?? {};
  for (const [name, schema] of Object.entries(schemas)) {
    try {
      ajv.addSchema(localRefs(schema), name);
    } catch (e) {
      problems.push(`components.schemas.${name}: ${e.message}`);
    }
  }
  for (const name of Object.keys(schemas)) {
    try {
      ajv.getSchema(name);
    } catch (e) {
      problems.push(`components.schemas.${name}: ${e.message}`);
    }
  }
  return ajv;
}
