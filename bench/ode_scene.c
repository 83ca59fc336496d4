/* ODE reference for `python -m bench`: any benchmark scene, read from a text
 * description that bench/scenes.py writes from the same Scene objects jaxode
 * builds, stepped N worlds x S steps one world after the other on one core.
 *
 * Description, one item per line (angles as quaternions w x y z, SI units):
 *   world gx gy gz erp cfm iterations sor
 *   body  px py pz qw qx qy qz vx vy vz wx wy wz mass I11 I12 I13 I22 I23 I33
 *   plane nx ny nz offset mu max_contacts
 *   sphere BODY r px py pz qw qx qy qz mu max_contacts
 *   box    BODY lx ly lz px py pz qw qx qy qz mu max_contacts
 *   capsule BODY r length px py pz qw qx qy qz mu max_contacts
 *   hinge  B1 B2 anchor_x anchor_y anchor_z axis_x axis_y axis_z
 * BODY / B2 = -1: static geom (pose in the world) / joint to the world; an
 * attached geom's pose is its offset in the body frame.
 *
 * Contacts: dContactApprox1 (pyramid friction, bound = mu * normal force) with
 * mu = min(mu1, mu2), at most min(max_contacts1, max_contacts2) per geom pair,
 * bodies joined by a joint do not collide (dAreConnectedExcluding). A dHashSpace;
 * auto-disable off. Timed: collide + QuickStep + emptying the contact group.
 *
 * Written from the ODE user manual and <ode/ode.h>.
 * Build: cc -O2 bench/ode_scene.c -lode -lm -o /tmp/ode_scene
 * Usage: /tmp/ode_scene SCENE_FILE N S dt   prints one line of key=value pairs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ode/ode.h>

#ifdef dDOUBLE
#define PRECISION "double"
#else
#define PRECISION "single"
#endif

#define MAX_ITEMS 4096
#define MAX_CONTACTS 64

typedef struct { double mu; int maxc; } Surf;

typedef struct {
    dWorldID world;
    dSpaceID space;
    dJointGroupID group;
    dBodyID body[MAX_ITEMS];
    int nbody;
    Surf surf[MAX_ITEMS];
    int ngeom;
} World;

static long g_contacts;

static void near_callback(void *data, dGeomID o1, dGeomID o2)
{
    World *w = (World *)data;
    dContact c[MAX_CONTACTS];
    Surf *s1 = (Surf *)dGeomGetData(o1), *s2 = (Surf *)dGeomGetData(o2);
    dBodyID b1 = dGeomGetBody(o1), b2 = dGeomGetBody(o2);
    int i, n, maxc = s1->maxc < s2->maxc ? s1->maxc : s2->maxc;
    double mu = s1->mu < s2->mu ? s1->mu : s2->mu;

    if (b1 && b2 && dAreConnectedExcluding(b1, b2, dJointTypeContact))
        return;
    if (maxc > MAX_CONTACTS)
        maxc = MAX_CONTACTS;
    n = dCollide(o1, o2, maxc, &c[0].geom, sizeof(dContact));
    for (i = 0; i < n; i++) {
        dJointID j;
        c[i].surface.mode = dContactApprox1;
        c[i].surface.mu = mu;
        j = dJointCreateContact(w->world, w->group, &c[i]);
        dJointAttach(j, b1, b2);
    }
    g_contacts += n;
}

static void place(dGeomID g, World *w, int body, const double *p, const double *q,
                  double mu, int maxc)
{
    dQuaternion quat = {q[0], q[1], q[2], q[3]};
    Surf *s = &w->surf[w->ngeom++];
    s->mu = mu;
    s->maxc = maxc;
    dGeomSetData(g, s);
    if (body >= 0) {
        dGeomSetBody(g, w->body[body]);
        dGeomSetOffsetPosition(g, p[0], p[1], p[2]);
        dGeomSetOffsetQuaternion(g, quat);
    } else {
        dGeomSetPosition(g, p[0], p[1], p[2]);
        dGeomSetQuaternion(g, quat);
    }
}

static void fail(const char *what, int line)
{
    fprintf(stderr, "ode_scene: bad %s on line %d\n", what, line);
    exit(2);
}

static void world_create(World *w, const char *path)
{
    FILE *f = fopen(path, "r");
    char kind[32];
    int line = 0;
    if (!f) {
        perror(path);
        exit(2);
    }
    memset(w, 0, sizeof(*w));
    w->world = dWorldCreate();
    dWorldSetAutoDisableFlag(w->world, 0);
    w->space = dHashSpaceCreate(0);
    w->group = dJointGroupCreate(0);
    while (fscanf(f, "%31s", kind) == 1) {
        double v[24];
        int b, b2, maxc;
        line++;
        if (!strcmp(kind, "world")) {
            int it;
            if (fscanf(f, "%lf %lf %lf %lf %lf %d %lf", &v[0], &v[1], &v[2], &v[3], &v[4], &it,
                       &v[5]) != 7) fail(kind, line);
            dWorldSetGravity(w->world, v[0], v[1], v[2]);
            dWorldSetERP(w->world, v[3]);
            dWorldSetCFM(w->world, v[4]);
            dWorldSetQuickStepNumIterations(w->world, it);
            dWorldSetQuickStepW(w->world, v[5]);
        } else if (!strcmp(kind, "body")) {
            dMass m;
            dQuaternion q;
            dBodyID body;
            int k;
            for (k = 0; k < 20; k++)
                if (fscanf(f, "%lf", &v[k]) != 1) fail(kind, line);
            if (w->nbody >= MAX_ITEMS) fail("body count", line);
            body = w->body[w->nbody++] = dBodyCreate(w->world);
            dMassSetParameters(&m, v[13], 0, 0, 0, v[14], v[17], v[19], v[15], v[16], v[18]);
            dBodySetMass(body, &m);
            dBodySetPosition(body, v[0], v[1], v[2]);
            q[0] = v[3]; q[1] = v[4]; q[2] = v[5]; q[3] = v[6];
            dBodySetQuaternion(body, q);
            dBodySetLinearVel(body, v[7], v[8], v[9]);
            dBodySetAngularVel(body, v[10], v[11], v[12]);
        } else if (!strcmp(kind, "plane")) {
            if (fscanf(f, "%lf %lf %lf %lf %lf %d", &v[0], &v[1], &v[2], &v[3], &v[4], &maxc) != 6)
                fail(kind, line);
            {
                dGeomID g = dCreatePlane(w->space, v[0], v[1], v[2], v[3]);
                Surf *s = &w->surf[w->ngeom++];
                s->mu = v[4];
                s->maxc = maxc;
                dGeomSetData(g, s);
            }
        } else if (!strcmp(kind, "sphere") || !strcmp(kind, "box") || !strcmp(kind, "capsule")) {
            int nsize = !strcmp(kind, "sphere") ? 1 : !strcmp(kind, "box") ? 3 : 2, k;
            dGeomID g;
            if (fscanf(f, "%d", &b) != 1) fail(kind, line);
            for (k = 0; k < nsize + 8; k++)
                if (fscanf(f, "%lf", &v[k]) != 1) fail(kind, line);
            if (fscanf(f, "%d", &maxc) != 1) fail(kind, line);
            if (nsize == 1)
                g = dCreateSphere(w->space, v[0]);
            else if (nsize == 3)
                g = dCreateBox(w->space, v[0], v[1], v[2]);
            else
                g = dCreateCapsule(w->space, v[0], v[1]);
            place(g, w, b, &v[nsize], &v[nsize + 3], v[nsize + 7], maxc);
        } else if (!strcmp(kind, "hinge")) {
            dJointID j;
            if (fscanf(f, "%d %d %lf %lf %lf %lf %lf %lf", &b, &b2, &v[0], &v[1], &v[2], &v[3],
                       &v[4], &v[5]) != 8) fail(kind, line);
            j = dJointCreateHinge(w->world, 0);
            dJointAttach(j, w->body[b], b2 >= 0 ? w->body[b2] : 0);
            dJointSetHingeAnchor(j, v[0], v[1], v[2]);
            dJointSetHingeAxis(j, v[3], v[4], v[5]);
        } else {
            fail(kind, line);
        }
    }
    fclose(f);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int n, s, i, k;
    double dt, t_step = 0.0;
    const dReal *p = NULL;
    World *w;
    if (argc != 5) {
        fprintf(stderr, "usage: %s SCENE_FILE NWORLD STEPS DT\n", argv[0]);
        return 2;
    }
    n = atoi(argv[2]);
    s = atoi(argv[3]);
    dt = atof(argv[4]);
    dInitODE2(0);
    w = malloc(sizeof(World));
    for (i = 0; i < n; i++) {
        world_create(w, argv[1]);
        {
            double t0 = now();
            for (k = 0; k < s; k++) {
                dSpaceCollide(w->space, w, near_callback);
                dWorldQuickStep(w->world, dt);
                dJointGroupEmpty(w->group);
            }
            t_step += now() - t0;
        }
        p = dBodyGetPosition(w->body[w->nbody - 1]);
        if (i == n - 1)
            printf("world_steps_per_s=%.6g step_s=%.6g contacts_per_step=%.4g precision=%s "
                   "final_pos=%.5f,%.5f,%.5f\n", n * (double)s / t_step, t_step,
                   g_contacts / ((double)n * s), PRECISION, p[0], p[1], p[2]);
        dJointGroupDestroy(w->group);
        dSpaceDestroy(w->space);
        dWorldDestroy(w->world);
    }
    free(w);
    dCloseODE();
    return 0;
}
