// The changelog format of `changeset version` ([Note: changelog format]): one entry per changeset,
// its summary as written; the internal dependencies a release picks up are one line, not one line
// per changeset that touched them (the default writer's "- Updated dependencies", repeated).
async function getReleaseLine(changeset) {
  const [first = '', ...rest] = changeset.summary.trim().split('\n');
  return [`- ${first}`, ...rest.map((line) => (line.trim() === '' ? '' : `  ${line}`))].join('\n');
}

async function getDependencyReleaseLine(_changesets, dependenciesUpdated) {
  if (dependenciesUpdated.length === 0) return '';
  const names = dependenciesUpdated.map((dependency) => `${dependency.name}@${dependency.newVersion}`);
  return `- Updated dependencies: ${names.join(', ')}`;
}

module.exports = { getReleaseLine, getDependencyReleaseLine };
