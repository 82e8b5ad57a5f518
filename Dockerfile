# syntax=docker/dockerfile:1
# Two stages. "build" installs every dependency (npm ci) and type-checks, so a broken tree never becomes an
# image. "runtime" installs production dependencies only (npm ci --omit=dev) and runs as the unprivileged
# `node` user. TypeScript runs through tsx, a production dependency, so the image starts with the same
# command as `npm start` and has no compile step to drift from the tests.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
# .dockerignore keeps node_modules, .git, .env and local output out of the context.
COPY . .
RUN npx tsc --noEmit -p .

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    PORT=3000 \
    POLICY_FILE=/etc/cloudops/policy.yml
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/src ./src
# The cloud simulator ships too, for the compose "sim" profile (`npm run sim`).
COPY --from=build /app/sim ./sim
# A placeholder policy so the image starts; mount your own at /etc/cloudops/policy.yml.
COPY policy.example.yml /etc/cloudops/policy.yml
USER node
EXPOSE 3000
# /healthz answers on PORT in every ROLE; node's fetch, since the slim image has no curl.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The same command as `npm start`, without npm in between, so SIGTERM reaches the bot directly.
CMD ["node", "--import", "tsx", "src/main.ts"]
