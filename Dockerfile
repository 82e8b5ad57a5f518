# syntax=docker/dockerfile:1
# Two stages. "build" installs every dependency (npm ci) and compiles the TypeScript to dist/ (tsc type-checks
# as it compiles, and emits nothing on an error), so a broken tree never becomes an image. "runtime" installs
# production dependencies only (npm ci --omit=dev: no TypeScript, no tsx), copies dist/ and the CLI, and runs
# the compiled JavaScript as the unprivileged `node` user. Nothing is written at run time: the container runs
# with a read-only root filesystem (`docker run --read-only`, `read_only: true` in docker-compose.yml).
#
# Both stages start from one base image pinned by digest, so a rebuild gets the same bytes until the digest is
# changed here on purpose. The tag stays for the reader; Docker uses the digest. The digest below is the one of
# node:24-bookworm-slim published with Node.js 24.18.0 (July 2026). To move to the current one:
#   docker buildx imagetools inspect node:24-bookworm-slim     # the "Digest:" line (the multi-platform index)
# then replace the digest in both FROM lines, rebuild, run the tests, and commit. Do this for each Node.js 24
# security release.

FROM node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
# .dockerignore keeps node_modules, .git, .env and local output out of the context.
COPY . .
RUN npm run build

FROM node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d AS runtime
ENV NODE_ENV=production \
    PORT=3000 \
    POLICY_FILE=/etc/cloudops/policy.yml
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
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
