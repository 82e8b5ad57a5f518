# syntax=docker/dockerfile:1
# Two stages. "build" installs every dependency (npm ci) and compiles the TypeScript to dist/ (tsc type-checks
# as it compiles, and emits nothing on an error), so a broken tree never becomes an image. "runtime" installs
# production dependencies only (npm ci --omit=dev: no TypeScript, no tsx), copies dist/ and the CLI, and runs
# the compiled JavaScript as the unprivileged `node` user. Nothing is written at run time: the container runs
# with a read-only root filesystem (`docker run --read-only`, `read_only: true` in docker-compose.yml).
#
# Both stages start from one base image: the Node.js the tests run on (the registry's `node` package in
# package-lock.json; test/unit/ops-packaging.test.ts checks they agree), pinned by digest, so a rebuild gets the same
# bytes until the digest is changed here on purpose. The tag stays for the reader; Docker uses the digest, the
# multi-platform index of node:24.21.0-bookworm-slim as published on 2026-09-19. To move to a new Node.js release:
#   npm install --save-dev node@X.Y.Z                                  # the tests' Node, in the lockfile
#   docker buildx imagetools inspect node:X.Y.Z-bookworm-slim          # its "Digest:" line (the index)
# then set NODE_VERSION and NODE_DIGEST below, rebuild, run the tests, and commit. Do this for each Node.js 24
# security release.
ARG NODE_VERSION=24.21.0
ARG NODE_DIGEST=sha256:0e0ff40c39bc087845bfb27465a0df4ea419520094bc35842ff83dd8cbe6f9b6

FROM node:${NODE_VERSION}-bookworm-slim@${NODE_DIGEST} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
# .dockerignore keeps node_modules, .git, .env and local output out of the context.
COPY . .
RUN npm run build
# The SBOM of the runtime tree, from the lockfile by the same script as `npm run release` (docs/operations.md#releases).
RUN node scripts/sbom.mjs /app/sbom.cdx.json

FROM node:${NODE_VERSION}-bookworm-slim@${NODE_DIGEST} AS runtime
ENV NODE_ENV=production \
    PORT=3000 \
    POLICY_FILE=/etc/cloudops/policy.yml
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# What the image runs, for a scanner (Trivy, Grype, Dependency-Track): /app/sbom.cdx.json.
COPY --from=build /app/sbom.cdx.json ./sbom.cdx.json
# The font the price charts are drawn with (the slim image has none; docs/charts.md).
COPY assets ./assets
# The operator CLI (`docker compose exec bot cloudops audit --since 24h`); it runs dist/.
COPY bin ./bin
COPY scripts/dist.mjs ./scripts/dist.mjs
RUN ln -s /app/bin/cloudops.mjs /usr/local/bin/cloudops && cloudops --version
# A placeholder policy so the image starts; mount your own at /etc/cloudops/policy.yml.
COPY policy.example.yml /etc/cloudops/policy.yml
USER node
EXPOSE 3000
# /healthz answers on PORT in every ROLE; node's fetch, since the slim image has no curl.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The same command as `npm start`, without npm in between, so SIGTERM reaches the bot directly. V8 sized for memory:
# under steady load it keeps about 130 MB resident instead of 330-350 MB, for about 5 ms more CPU per resize
# (docs/performance.md#memory-under-steady-load). Maglev's code built on the main thread: with the memory flag alone
# the process could hang for ever inside its own exit (docs/operations.md#a-bot-that-never-exits).
CMD ["node", "--optimize-for-size", "--no-maglev-build-code-on-background", "--no-maglev-deopt-data-on-background", "--no-concurrent-sparkplug", "dist/src/main.js"]
